"""After a feed gap (410) the live follower reads the peer's well-known
document (its feed epoch and head) through the peer client: capped in
bytes and in time like every other answer of a peer. A peer that answers
the gap with an endless or a trickled document is a failed repair, logged
and backed off, while the relay goes on answering."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from peer import PeerConfig
from peer.http import PeerLimits
from peer.sync_http import HttpSyncClient
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore

GAP = b'{"error": "gone", "minSeq": 1, "epoch": "e"}'
Document = Callable[[asyncio.StreamWriter], Awaitable[None]]


async def endless(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n[")
    while True:
        writer.write(b" " * 65536)
        await writer.drain()


async def trickled(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n[")
    while True:
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(0.1)


@asynccontextmanager
async def gap_peer(document: Document) -> AsyncIterator[str]:
    """Every /changes is a 410; the well-known document is ``document``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        try:
            if b" /.well-known/dfos-relay" in request:
                await document(writer)
            else:
                head = f"HTTP/1.1 410 Gone\r\ncontent-length: {len(GAP)}\r\n\r\n".encode()
                writer.write(head + GAP)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


@pytest.mark.parametrize("document", [endless, trickled], ids=["endless", "trickled"])
async def test_a_gap_repair_reads_a_capped_well_known(document: Document) -> None:
    limits = PeerLimits(max_response_bytes=1024 * 1024, request_deadline_s=1.0)
    config = PeeringConfig(backoff_base_s=0.05, backoff_max_s=0.2)
    async with gap_peer(document) as url:
        peer = PeerConfig(url, gossip=False, read_through=False, sync=False, live=True)
        client = HttpSyncClient(limits=limits)
        follower = create_relay(MemoryStore(), peering=build_peering([peer], client, config))
        peering = follower.peering
        assert isinstance(peering, Peering)
        tracemalloc.start()
        try:
            async with serve_on_loopback(follower.app) as me, httpx.AsyncClient() as http:
                for _ in range(100):  # 10 s
                    began = time.monotonic()
                    assert (await http.get(f"{me}/healthz")).status_code == 200
                    assert time.monotonic() - began < 1.0
                    if peering.ledger.get(url, "in").failures >= 2:
                        break
                    await asyncio.sleep(0.1)
                link = peering.ledger.get(url, "in")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await client.aclose()
    assert link.failures >= 2, "the repair never ended"
    assert link.last_error and ("cap" in link.last_error or "deadline" in link.last_error)
    assert peak < 32 * 1024 * 1024, f"{peak} bytes held"
