"""The peer client's connection pool serves every peer; read-through
fetches at most ``read_through_peer_fetches`` chains from one peer at
once. A read-through peer that holds every request it gets (and clients
asking for many unknown chains) therefore cannot take the whole pool:
the sync with a healthy peer still gets its connections, and the relay
goes on answering."""

from __future__ import annotations

import asyncio
import time

from peer import PeerConfig
from peer.http import PeerLimits
from peer.sync_http import HttpSyncClient
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

from .hostile_http import raw_peer

LIMITS = PeerLimits(read_timeout_s=30.0, pool_timeout_s=1.0, request_deadline_s=30.0)
POOL = 100  # connections of HttpPeerClient's pool
MISSES = POOL + 20


async def holds_every_request(writer: asyncio.StreamWriter) -> None:
    await asyncio.Event().wait()  # until the test ends


async def test_a_slow_read_through_peer_holds_a_share_of_the_pool() -> None:
    tokens = mixed_workload(30, seed=47, now_ms=PAST_MS)
    healthy = create_relay()
    await healthy.ingest(tokens)
    config = PeeringConfig(read_through_deadline_s=0.2, backoff_base_s=30.0)
    async with raw_peer(holds_every_request) as slow, serve_on_loopback(healthy.app) as good:
        peers = [
            PeerConfig(slow, gossip=False, sync=False, read_through=True),
            PeerConfig(good, gossip=False, sync=True, read_through=False),
        ]
        client = HttpSyncClient(limits=LIMITS)
        relay = create_relay(peering=build_peering(peers, client, config))
        async with (
            relay.running(),
            asgi_client(relay.app) as http,
        ):
            misses = [http.get(f"/identities/did:dfos:unknown{i}") for i in range(MISSES)]
            answers = await asyncio.gather(*misses)
            assert {a.status_code for a in answers} == {404}
            started = time.monotonic()
            assert await relay.sync_from_peers() >= len(tokens)  # the pool had room for it
            assert (await http.get("/healthz")).status_code == 200
            assert time.monotonic() - started < 1.0
        await client.aclose()
