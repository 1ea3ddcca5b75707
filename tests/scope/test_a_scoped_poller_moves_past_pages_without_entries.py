"""A relay polling a peer's ``/log?scope=`` keeps the cursor of a page
that scanned its budget and found nothing in scope: it goes on from there
(in this cycle and the next), instead of stopping at an empty page and
asking for the same stretch of out-of-scope ops again forever."""

from __future__ import annotations

import functools

import pytest

from peer import PeerConfig
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from relay.scope import parse_scope
from relay.scope.pages import scoped_log_page
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore

from .world import build_world, expected_closure


async def test_a_scoped_poller_moves_past_pages_without_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a scan budget of 2: the peer's first pages hold only out-of-scope ops
    budgeted = functools.partial(scoped_log_page, scan_budget=2)
    monkeypatch.setattr("relay.http.proof.scoped_log_page", budgeted)
    world = build_world(seed=23)
    serving = create_relay()
    await serving.ingest(world.tokens)
    scope = parse_scope(world.chain.content_id)
    async with serve_on_loopback(serving.app) as url:
        peer = PeerConfig(url, gossip=False, read_through=False, sync=True)
        mirror = create_relay(
            MemoryStore(), peering=build_peering([peer], None, PeeringConfig(scope=scope))
        )
        async with mirror.running():
            for _ in range(3):
                await mirror.sync_from_peers()
            got = {(e.kind, e.chain_id) for e in await mirror.store.read_seq_range(0, 10**6, 1000)}
    assert expected_closure(world) <= got
