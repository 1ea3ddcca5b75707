"""The relay push headers through real hypercorn servers on loopback: every
push names its sender relay and fan-out hop, the receiver maps the sender to
the configured peer (so nothing is pushed back to it), and the well-known
document advertises the peers with their DIDs."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import httpx

from peer import HttpPeerClient, PeerConfig
from peer.base import FANOUT_HOP_HEADER, HOP_TO_COORDINATOR, RELAY_SENDER_HEADER
from relay import create_relay
from relay.peering.service import Peering, build_peering
from relay.testing.server import free_port, serve_on_loopback
from relay.testing.workload import mixed_workload
from tests.peering.mesh import FAST, post_all
from tests.support.backends import make_store
from tests.support.relay_api import PAST_MS


async def test_push_headers_reach_a_relay_served_by_hypercorn(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(2)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    seen: list[tuple[str, str | None, str | None, bytes]] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST" and request.url.path == "/operations":
            headers = request.headers
            seen.append(
                (str(request.url), headers.get(RELAY_SENDER_HEADER),
                 headers.get(FANOUT_HOP_HEADER), request.content)
            )  # fmt: skip

    # fanout_direct_max=0: even one peer gets rendezvous hops
    config = replace(FAST, fanout_direct_max=0)
    tokens = mixed_workload(20, seed=31, now_ms=PAST_MS)
    async with AsyncExitStack() as stack:
        peer_http = await stack.enter_async_context(
            httpx.AsyncClient(timeout=10, event_hooks={"request": [record]})
        )
        client = HttpPeerClient(peer_http)
        relays = []
        for i, (port, url) in enumerate(zip(ports, urls, strict=True)):
            (tmp_path / f"r{i}").mkdir()
            store = await stack.enter_async_context(make_store("sqlite", tmp_path / f"r{i}"))
            peers = [PeerConfig(u, gossip=True, read_through=False, sync=False) for u in urls]
            peering = build_peering([p for p in peers if p.url != url], client, config)
            relay = create_relay(store, peering=peering)
            await stack.enter_async_context(serve_on_loopback(relay.app, port))
            relays.append(relay)
        a, b = (r.peering for r in relays)
        assert isinstance(a, Peering) and isinstance(b, Peering)
        for p in (a, b):
            await p.directory.refresh()
        plain = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
        doc = (await plain.get(urls[0] + "/.well-known/dfos-relay")).json()
        assert doc["peers"] == [{"url": urls[1], "did": relays[1].did}]
        seen.clear()
        await post_all(plain, urls[0], tokens)
        await a.flushed()
        await b.flushed()
        # B took A's push as A's (its echo memory is keyed by A's URL) ...
        assert b.echo.size(urls[0]) >= len(tokens)
    # (the relays' own start-up ops were routed before either knew the
    # other's DID: they may still be on their way, with hop "2")
    to_b = [s for s in seen if s[0].startswith(urls[1]) and any(t.encode() in s[3] for t in tokens)]
    assert to_b and all(s[1] == relays[0].did and s[2] == HOP_TO_COORDINATOR for s in to_b)
    # ... and pushed none of those ops back to A
    back = [s for s in seen if s[0].startswith(urls[0])]
    assert not any(t.encode() in body for _, _, _, body in back for t in tokens)
