"""Peers as operators see them, sync and set reconciliation triggered by
hand (one peer or all), and the replication ledger (the peer cursors the
store holds)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from peer import AsgiMeshTransport, PeerConfig
from peer.sync_http import HttpSyncClient
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from relay.testing.workload import mixed_workload
from stores.base import RelayStore

from .conftest import TRANSPORTS, World, open_world

PEER = "http://peer-b.test"


@pytest.fixture
async def peer_b() -> AsyncIterator[Relay]:
    relay = create_relay()
    async with relay.running():
        yield relay


@pytest.fixture(params=TRANSPORTS)
async def peered(
    request: pytest.FixtureRequest,
    store: RelayStore,
    audit_lines: list[dict[str, Any]],
    peer_b: Relay,
) -> AsyncIterator[World]:
    mesh = AsgiMeshTransport({PEER: peer_b.app})
    async with httpx.AsyncClient(transport=mesh) as http:
        config = PeeringConfig(backoff_base_s=0.01, backoff_max_s=0.05)
        peering = build_peering(
            [PeerConfig(PEER, gossip=False, read_through=False, sync=True)],
            HttpSyncClient(http),  # reconciliation shares it
            config,
        )
        async with open_world(store, request.param, audit_lines, peering=peering) as w:
            yield w


async def test_peers_sync_and_the_ledger(peered: World, peer_b: Relay) -> None:
    w = peered
    peers = (await w.admin("GET", "/admin/peers")).json()["peers"]
    assert peers == [
        {
            "url": PEER, "behaviours": ["sync"], "failures": 0, "retryInSeconds": 0.0,
            "gossipBacklog": 0, "gossipDropped": 0, "logCursor": None, "feedToken": None,
        }
    ]  # fmt: skip
    workload = mixed_workload(40, seed=5, now_ms=w.clock())
    assert {r.status.value for r in await peer_b.ingest(workload)} == {"new"}

    response = await w.admin("POST", "/admin/peers/sync", {"peer": PEER})
    assert response.status_code == 200, response.text
    assert response.json()["sequenced"] >= len(workload)
    assert w.audits("sync")[-1]["sequenced"] == response.json()["sequenced"]
    again = await w.admin("POST", "/admin/peers/sync", {})
    assert again.json() == {"peer": None, "sequenced": 0}

    await w.relay.store.set_peer_cursor(PEER + "#changes", "e0.7")
    ledger = (await w.admin("GET", "/admin/ledger")).json()["peerCursors"]
    log_cursor = await w.relay.store.get_peer_cursor(PEER)
    assert ledger == [
        {"key": PEER, "peer": PEER, "stream": "log", "cursor": log_cursor},
        {"key": PEER + "#changes", "peer": PEER, "stream": "changes", "cursor": "e0.7"},
    ]
    listed = (await w.admin("GET", "/admin/peers")).json()["peers"][0]
    assert listed["logCursor"] == log_cursor and listed["feedToken"] == "e0.7"


async def test_reconciliation_on_demand_and_unknown_peers(peered: World, peer_b: Relay) -> None:
    w = peered
    workload = mixed_workload(30, seed=6, now_ms=w.clock())
    assert {r.status.value for r in await peer_b.ingest(workload)} == {"new"}
    response = await w.admin("POST", "/admin/peers/reconcile", {"peer": PEER})
    assert response.status_code == 200, response.text
    report = response.json()["result"]
    assert report["error"] is None and report["sequenced"] >= len(workload)
    line = w.audits("reconcile")[-1]
    assert line["outcome"] == "ok" and line["peer"] == PEER
    for path in ("/admin/peers/sync", "/admin/peers/reconcile"):
        unknown = await w.admin("POST", path, {"peer": "http://nobody.test"})
        assert unknown.status_code == 404, path
    assert (await w.admin("POST", "/admin/peers/reconcile", {})).status_code == 400


async def test_a_relay_without_peers(world: World) -> None:
    assert (await world.admin("GET", "/admin/peers")).json() == {"peers": []}
    assert (await world.admin("POST", "/admin/peers/sync")).json()["sequenced"] == 0
    response = await world.admin("POST", "/admin/peers/sync", {"peer": PEER})
    assert response.status_code == 404
    assert (await world.admin("GET", "/admin/ledger")).json() == {"peerCursors": []}
