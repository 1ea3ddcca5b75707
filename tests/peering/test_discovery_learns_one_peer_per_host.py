"""Discovery learns at most ``peer_discovery_per_host`` peers (1, configured
ones included) per host name, whatever their ports or paths: a hostile
peer whose well-known ``peers`` names 64 URLs on one host of its own (with
made-up DIDs), each of which accepts every request and never answers,
gets one gossip lane there, not 64 lanes each holding a connection of the
pool every peer shares. Gossip to a healthy peer, read-through and sync go
on; the hostile host never holds more than a few connections."""

from __future__ import annotations

import asyncio

import httpx

from peer import PeerConfig
from peer.http import PeerLimits
from peer.sync_http import HttpSyncClient
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.directory import Advertised
from relay.peering.discovery import host_of, learn_peers
from relay.peering.service import Peering, build_peering
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, post

from .healthy_peers import healthy_peers_are_served
from .hostile_http import Holding, json_answer, routed_peer
from .test_directory import _directory_with

LIMITS = PeerLimits(read_timeout_s=30.0, pool_timeout_s=1.0, request_deadline_s=30.0)
LISTED = 64  # the hostile peer's own URLs in its 'peers' (the discovery bound)
POSTS = 100


def test_discovery_learns_at_most_one_peer_per_host_name() -> None:
    me = "did:dfos:me"
    directory = _directory_with(
        {
            "http://c0.test": [
                *(Advertised(f"http://evil.test:{8000 + i}/r", f"did:dfos:e{i}") for i in range(3)),
                *(Advertised(f"http://EVIL.test/r{i}", f"did:dfos:p{i}") for i in range(3)),
                Advertised("http://c0.test/other", "did:dfos:c0b"),  # a configured peer's host
                Advertised("http://n1.test", "did:dfos:n1"),
            ],
        }
    )
    learned = learn_peers(directory, list(directory.urls), me, room=10)
    assert [e.url for e in learned] == ["http://evil.test:8000/r", "http://n1.test"]
    learned = learn_peers(directory, list(directory.urls), me, room=10, per_host=3)
    assert len(learned) == 5  # 3 on evil.test, c0.test's second relay, n1.test


async def test_a_host_listing_many_urls_of_its_own_holds_few_connections() -> None:
    tokens = mixed_workload(POSTS, seed=52, now_ms=PAST_MS)
    synced = mixed_workload(20, seed=53, now_ms=PAST_MS)
    healthy, source = create_relay(), create_relay()
    await source.ingest(synced)
    held = Holding()
    document: dict[str, object] = {"did": "did:dfos:hostile"}
    # every op to every lane (no rendezvous), 10 a push; a failed push waits long
    config = PeeringConfig(
        gossip_batch=10, backoff_base_s=30.0, fanout_direct_max=1000, peer_discovery=True
    )
    routes = {"/.well-known/dfos-relay": json_answer(document), "/": held}
    async with (
        routed_peer(routes) as hostile,
        serve_on_loopback(healthy.app) as good,
        serve_on_loopback(source.app) as src,
    ):
        # its URLs on another name of its host (the configured peers sit on 127.0.0.1)
        mine = hostile.replace("127.0.0.1", "localhost")
        document["peers"] = [
            {"url": f"{mine}/r{i}", "did": f"did:dfos:made-up-{i}"} for i in range(LISTED)
        ]
        peers = [
            PeerConfig(hostile, gossip=True, sync=False, read_through=False),
            PeerConfig(good, gossip=True, sync=False, read_through=False),
            PeerConfig(src, gossip=False, sync=True, read_through=True),
        ]
        client = HttpSyncClient(limits=LIMITS)
        relay = create_relay(peering=build_peering(peers, client, config))
        peering = relay.peering
        assert isinstance(peering, Peering)
        async with (
            relay.running(),
            asgi_client(relay.app) as http,
            httpx.AsyncClient(base_url=good) as good_http,
        ):
            await peering.directory.refresh()  # reads the list: discovery learns from it
            await asyncio.gather(*(post(http, [token]) for token in tokens))
            # meanwhile the next refresh reads every peer's document (learned ones too)
            refresh = asyncio.create_task(peering.directory.refresh())
            await healthy_peers_are_served(relay, http, good_http, len(tokens), source, len(synced))
            refresh.cancel()
        await client.aclose()
    assert [host_of(url) for url in peering.learned] == ["localhost"]  # one of its 64
    assert held.most <= 4, f"the hostile host held {held.most} connections at once"
