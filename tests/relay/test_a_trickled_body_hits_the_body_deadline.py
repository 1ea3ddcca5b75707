"""A request body trickled in a byte at a time (slowloris) cannot hold its
connection forever: past the body deadline the relay answers 408 with a JSON
error, with or without a Content-Length."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

from stores.memory import MemoryStore
from tests.support.served import served_relay

ANSWER_WITHIN_S = 20.0  # the default deadline (relay.config.DEFAULT_BODY_GRACE_S, 10 s) and slack
ROUTES = ("/operations", "/operations/status", "/sync/negentropy", "/sync/operations")


async def trickle(port: int, path: str, chunked: bool) -> tuple[int, dict[str, str], float]:
    """POST a body one byte a second until the relay answers; its status,
    JSON body and how long it took (TimeoutError: no answer in time)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: 100000"
    writer.write(b"POST %s HTTP/1.1\r\nHost: relay\r\n%s\r\n\r\n" % (path.encode(), framing))
    started = time.monotonic()

    async def drip() -> None:
        with contextlib.suppress(OSError):
            while True:
                writer.write(b"1\r\n \r\n" if chunked else b" ")
                await writer.drain()
                await asyncio.sleep(1)

    dripping = asyncio.create_task(drip())
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), ANSWER_WITHIN_S)
        elapsed = time.monotonic() - started
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = json.loads(await reader.readexactly(length))
    finally:
        dripping.cancel()
        writer.close()
    return int(head.split(b" ", 2)[1]), body, elapsed


async def test_a_trickled_body_is_answered_408() -> None:
    # every route, with a Content-Length and chunked, trickled at once: one
    # wait for the deadline instead of one per framing
    async with served_relay(MemoryStore(), "hypercorn") as served:
        port = int(str(served.client.base_url).rstrip("/").rsplit(":", 1)[1])
        answers = await asyncio.gather(
            *(trickle(port, path, chunked) for path in ROUTES for chunked in (False, True))
        )
    assert len(answers) == 2 * len(ROUTES)
    for status, body, elapsed in answers:
        assert status == 408 and "slowly" in body["error"]
        assert elapsed < ANSWER_WITHIN_S
