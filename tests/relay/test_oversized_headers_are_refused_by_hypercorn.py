"""Request headers too large are refused by hypercorn before the request
reaches the app: 431 with an empty body and the connection closed (README,
"Running a relay": why there is no JSON body). Pinned so that a hypercorn
that changes this is noticed, and the README with it."""

from __future__ import annotations

import asyncio

from relay import create_relay
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore


async def raw_get(port: int, header_bytes: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    filler = "a" * header_bytes
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: r\r\nX-Filler: {filler}\r\n\r\n".encode())
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 10)  # until hypercorn closes
    finally:
        writer.close()


async def test_a_header_block_over_hypercorns_limit_is_a_bare_431() -> None:
    async with serve_on_loopback(create_relay(MemoryStore()).app) as url:
        answer = await raw_get(int(url.rsplit(":", 1)[1]), 100_000)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431")
    assert b"content-length: 0" in head.lower() and b"connection: close" in head.lower()
    assert body == b""
