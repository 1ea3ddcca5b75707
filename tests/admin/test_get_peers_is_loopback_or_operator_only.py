"""``GET /peers`` shows the replication ledger per configured peer: only to
loopback clients while no operator is configured (a forwarded client
address counts when a trusted proxy sends it), and only to operators once
one is (from loopback too). Operators pause and resume a peer's links
(``POST /admin/peers/pause`` / ``resume``), and the link gauges are in
``/metrics``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from peer import AsgiMeshTransport, PeerConfig
from peer.sync_http import HttpSyncClient
from relay import Relay, create_relay
from relay.config import RelayConfig
from relay.limits import parse_trusted_proxies
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

from .conftest import World, open_world

PEER = "http://peer-b.test"
LOOPBACK = ("127.0.0.1", 50001)
PUBLIC = ("203.0.113.7", 50001)
SYNC_ONLY = PeerConfig(PEER, gossip=False, read_through=False, sync=True)


@pytest.fixture
async def peer_b() -> AsyncIterator[Relay]:
    relay = create_relay()
    async with relay.running():
        await relay.ingest(mixed_workload(20, seed=3, now_ms=PAST_MS))
        yield relay


def peering_to(peer_b: Relay, http: httpx.AsyncClient) -> Any:
    config = PeeringConfig(backoff_base_s=0.01, backoff_max_s=0.05)
    return build_peering([SYNC_ONLY], HttpSyncClient(http), config)


@asynccontextmanager
async def unadministered(peer_b: Relay, config: RelayConfig | None = None) -> AsyncIterator[Relay]:
    """A relay with no operator, syncing from ``PEER``, synced once."""
    mesh = AsgiMeshTransport({PEER: peer_b.app})
    async with httpx.AsyncClient(transport=mesh) as http:
        relay = create_relay(MemoryStore(), config=config, peering=peering_to(peer_b, http))
        async with relay.running():
            await relay.sync_peer(PEER)
            yield relay


async def get_peers(relay: Relay, client: tuple[str, int], **kw: Any) -> httpx.Response:
    async with asgi_client(relay.app, client=client) as http:
        return await http.get("/peers", **kw)


async def test_loopback_reads_the_ledger_without_a_token(peer_b: Relay) -> None:
    async with unadministered(peer_b) as relay:
        response = await get_peers(relay, LOOPBACK)
        assert response.status_code == 200, response.text
        (peer,) = response.json()["peers"]
        assert (peer["url"], peer["behaviours"]) == (PEER, ["sync"])
        (link,) = peer["links"]
        cursor = await relay.store.get_peer_cursor(PEER)
        assert link["scopeId"] == "*" and link["direction"] == "in"
        assert (link["state"], link["appliedToken"], link["failures"]) == ("live", cursor, 0)
        assert link["lastSuccessAt"].endswith("+00:00") and link["lastError"] is None
        assert set(link) == {
            "scopeId", "direction", "state", "receivedToken", "appliedToken", "pending",
            "lagOps", "lagSeconds", "failures", "lastSuccessAt", "lastFailureAt",
            "lastError", "diagnostics",
        }  # fmt: skip


async def test_other_clients_are_refused(peer_b: Relay) -> None:
    async with unadministered(peer_b) as relay:
        response = await get_peers(relay, PUBLIC)
        assert response.status_code == 403
        assert "loopback" in response.json()["error"]
        # a forwarded-for header from an untrusted peer is ignored
        forged = await get_peers(relay, PUBLIC, headers={"X-Forwarded-For": "127.0.0.1"})
        assert forged.status_code == 403


async def test_a_local_proxy_does_not_make_its_clients_local(peer_b: Relay) -> None:
    config = RelayConfig(trusted_proxies=parse_trusted_proxies(["127.0.0.1"]))
    async with unadministered(peer_b, config) as relay:
        proxied = await get_peers(relay, LOOPBACK, headers={"X-Forwarded-For": PUBLIC[0]})
        assert proxied.status_code == 403
        assert (await get_peers(relay, LOOPBACK)).status_code == 200


@pytest.fixture
async def administered(
    store: RelayStore, audit_lines: list[dict[str, Any]], peer_b: Relay
) -> AsyncIterator[World]:
    mesh = AsgiMeshTransport({PEER: peer_b.app})
    async with httpx.AsyncClient(transport=mesh) as http:
        config = RelayConfig()
        async with open_world(store, "in-process", audit_lines, config,
                              peering=peering_to(peer_b, http)) as w:  # fmt: skip
            await w.relay.sync_peer(PEER)
            yield w


async def test_once_operators_exist_even_loopback_needs_a_token(administered: World) -> None:
    w = administered
    assert (await get_peers(w.relay, LOOPBACK)).status_code == 403
    outsider = await get_peers(w.relay, LOOPBACK, headers=w.auth(w.token(w.outsider)))
    assert outsider.status_code == 403
    allowed = await get_peers(w.relay, PUBLIC, headers=w.auth())
    assert allowed.status_code == 200
    assert allowed.json()["peers"][0]["links"][0]["state"] == "live"


async def test_operators_pause_and_resume_a_peer(administered: World, peer_b: Relay) -> None:
    w = administered
    response = await w.admin("POST", "/admin/peers/pause", {"url": PEER})
    assert response.json() == {"url": PEER, "paused": ["in", "out"]}
    states = {(link["direction"], link["state"])
              for link in (await w.admin("GET", "/peers")).json()["peers"][0]["links"]}  # fmt: skip
    assert states == {("in", "paused"), ("out", "paused")}
    await peer_b.ingest(mixed_workload(5, seed=4, now_ms=PAST_MS))
    assert await w.relay.sync_from_peers() == 0  # a paused in-link is not synced
    assert w.audits("pause-peer")[-1]["peer"] == PEER

    response = await w.admin("POST", "/admin/peers/resume", {"url": PEER, "direction": "in"})
    assert response.json() == {"url": PEER, "resumed": ["in"]}
    assert await w.relay.sync_from_peers() > 0
    links = (await w.admin("GET", "/peers")).json()["peers"][0]["links"]
    assert {(link["direction"], link["state"]) for link in links} == {
        ("in", "live"), ("out", "paused")}  # fmt: skip

    unknown = await w.admin("POST", "/admin/peers/pause", {"url": "http://nobody.test"})
    assert unknown.status_code == 404
    bad = await w.admin("POST", "/admin/peers/pause", {"url": PEER, "direction": "up"})
    assert bad.status_code == 400
    assert (await w.admin("POST", "/admin/peers/pause", {})).status_code == 400


async def test_the_link_gauges_are_in_metrics(peer_b: Relay) -> None:
    async with unadministered(peer_b) as relay, asgi_client(relay.app, client=LOOPBACK) as http:
        text = (await http.get("/metrics")).text
    labels = f'direction="in",peer="{PEER}",scope="*"'
    assert f'dfos_relay_link_state{{{labels},state="live"}} 1.0' in text
    assert f'dfos_relay_link_state{{{labels},state="repairing"}} 0.0' in text
    assert f"dfos_relay_link_failures{{{labels}}} 0.0" in text
    assert f"dfos_relay_link_lag_seconds{{{labels}}} " in text  # since the last caught-up poll
