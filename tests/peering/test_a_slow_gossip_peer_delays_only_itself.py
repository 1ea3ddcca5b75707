"""A gossip peer that accepts every connection and never answers delays only
its own lane: each gossip peer has one worker, so it holds one push (and
one read of its well-known document) of the peer client's pool at a time,
however many ops wait for it. Ops posted to our relay still reach a healthy
peer promptly, and sync and read-through with a healthy peer still run."""

from __future__ import annotations

import asyncio

import httpx

from peer import PeerConfig
from peer.http import PeerLimits
from peer.sync_http import HttpSyncClient
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, post

from .healthy_peers import healthy_peers_are_served
from .hostile_http import Holding, raw_peer

LIMITS = PeerLimits(read_timeout_s=30.0, pool_timeout_s=1.0, request_deadline_s=30.0)
POSTS = 200  # one op a POST, 10 a gossip batch: 20 pushes for each peer


async def test_a_slow_gossip_peer_delays_only_itself() -> None:
    tokens = mixed_workload(POSTS, seed=48, now_ms=PAST_MS)
    synced = mixed_workload(20, seed=49, now_ms=PAST_MS)
    healthy, source = create_relay(), create_relay()
    await source.ingest(synced)
    held = Holding()
    config = PeeringConfig(gossip_batch=10, backoff_base_s=30.0)
    async with (
        raw_peer(held) as slow,
        serve_on_loopback(healthy.app) as good,
        serve_on_loopback(source.app) as src,
    ):
        peers = [
            PeerConfig(slow, gossip=True, sync=False, read_through=False),
            PeerConfig(good, gossip=True, sync=False, read_through=False),
            PeerConfig(src, gossip=False, sync=True, read_through=True),
        ]
        client = HttpSyncClient(limits=LIMITS)
        relay = create_relay(peering=build_peering(peers, client, config))
        async with (
            relay.running(),
            asgi_client(relay.app) as http,
            httpx.AsyncClient(base_url=good) as good_http,
        ):
            await asyncio.gather(*(post(http, [token]) for token in tokens))
            await healthy_peers_are_served(relay, http, good_http, len(tokens), source, len(synced))
        await client.aclose()
    assert 1 <= held.most <= 2, f"the slow peer held {held.most} connections at once"
