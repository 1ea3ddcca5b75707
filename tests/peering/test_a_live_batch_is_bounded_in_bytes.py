"""The live follower ingests op events in batches (``LIVE_BATCH`` while it
catches up); a batch also ends once its events hold ``LIVE_BATCH_CHARS``,
and keeps only what ingest needs of each event. A peer streaming events
just under the feed client's ``MAX_EVENT_BYTES`` (a token no relay takes,
or padding beside it) therefore costs about one batch of that size, not a
hundred events of it."""

from __future__ import annotations

import asyncio
import json
import tracemalloc

from peer import PeerConfig
from peer.feed import MAX_EVENT_BYTES
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from stores.memory import MemoryStore

from .hostile_http import head, routed_peer

EVENTS = 16
PAYLOAD = MAX_EVENT_BYTES // 2 - 128 * 1024


async def test_a_live_batch_is_bounded_in_bytes() -> None:
    async def feed(writer: asyncio.StreamWriter) -> None:
        writer.write(head({"content-type": "text/event-stream"}))
        writer.write(b'event: status\ndata: {"headSeq": 1000}\n\n')
        for seq in range(1, EVENTS + 1):
            data = {"seq": seq, "jwsToken": "a" * PAYLOAD, "padding": "p" * PAYLOAD}
            writer.write(f"event: op\nid: e.{seq}\ndata: {json.dumps(data)}\n\n".encode())
            await writer.drain()
        writer.write(f'event: eose\nid: e.{EVENTS}\ndata: {{"seq": {EVENTS}}}\n\n'.encode())
        await asyncio.Event().wait()

    async with routed_peer({"/changes": feed}) as url:
        peer = PeerConfig(url, gossip=False, read_through=False, sync=False, live=True)
        follower = create_relay(MemoryStore(), peering=build_peering([peer], None, PeeringConfig()))
        peering = follower.peering
        assert isinstance(peering, Peering)
        tracemalloc.start()
        try:
            async with follower.running():
                for _ in range(400):
                    if peering.ledger.get(url, "in").received_token == f"e.{EVENTS}":
                        break
                    await asyncio.sleep(0.05)
                peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    # every batch was ingested (each op rejected: no such token is a JWS)
    assert peering.ledger.get(url, "in").received_token == f"e.{EVENTS}"
    assert peak < 64 * 1024 * 1024, f"{peak} bytes held"
