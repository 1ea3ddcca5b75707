"""After a feed gap (410) the live follower reads the peer's well-known
document (its feed epoch and head) through the peer client: capped in
bytes and in time like every other answer of a peer. A peer that answers
the gap with an endless or a trickled document is a failed repair, logged
and backed off, while the relay goes on answering."""

from __future__ import annotations

import asyncio
import time
import tracemalloc

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

from .hostile_http import Answer, routed_peer

GAP = b'{"error": "gone", "minSeq": 1, "epoch": "e"}'


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


async def gap(writer: asyncio.StreamWriter) -> None:
    writer.write(f"HTTP/1.1 410 Gone\r\ncontent-length: {len(GAP)}\r\n\r\n".encode() + GAP)


@pytest.mark.parametrize("document", [endless, trickled], ids=["endless", "trickled"])
async def test_a_gap_repair_reads_a_capped_well_known(document: Answer) -> None:
    limits = PeerLimits(max_response_bytes=1024 * 1024, request_deadline_s=1.0)
    config = PeeringConfig(backoff_base_s=0.05, backoff_max_s=0.2)
    async with routed_peer({"/changes": gap, "/.well-known/dfos-relay": document}) as url:
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
