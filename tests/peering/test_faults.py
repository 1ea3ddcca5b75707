"""A peer that is down, slow, answers 500, garbage, huge pages or a tampered
chain never blocks ingestion or reads, changes nothing, is backed off, and
every failure is logged with its URL. Faulty peers run on loopback (hypercorn)
so timeouts and size caps are real; the relay under test is real."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import httpx
import pytest

from peer import HttpPeerClient, PeerConfig, PeerLimits
from relay import Relay, create_relay
from relay.peering.service import Peering, build_peering
from relay.testing.server import free_port, serve_on_loopback
from relay.testing.workload import WorkloadBuilder, mixed_workload
from tests.peering.faulty import FAULTS, faulty_peer
from tests.peering.mesh import FAST
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

LIMITS = PeerLimits(connect_timeout_s=0.5, read_timeout_s=0.3, max_response_bytes=256 * 1024)
CFG = replace(FAST, backoff_base_s=30.0, backoff_max_s=30.0, gossip_flush_timeout_s=0.2)


@asynccontextmanager
async def relay_with_peer(peer_url: str, *extra: str) -> AsyncIterator[Relay]:
    async with httpx.AsyncClient() as http:
        peers = [PeerConfig(peer_url), *(PeerConfig(u) for u in extra)]
        relay = create_relay(peering=build_peering(peers, HttpPeerClient(http, LIMITS), CFG))
        async with relay.running():
            yield relay


def _identity_chain(seed: int) -> tuple[str, list[str]]:
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    actor = b.identity()
    b.rotate(actor)
    return actor.did, b.tokens


async def _check_relay_survives(relay: Relay, peer_url: str, did: str) -> None:
    peering = relay.peering
    assert isinstance(peering, Peering)
    async with asgi_client(relay.app) as c:
        before = await relay.store.log_length()
        started = time.monotonic()
        # a read-through miss against the bad peer: 404, promptly
        assert (await c.get(f"/identities/{did}")).status_code == 404
        assert (await c.get(f"/identities/{did}/log")).status_code == 404
        assert time.monotonic() - started < 2.0
        # the failure backed the peer off; later reads do not even ask it
        assert not peering.backoff.ready(peer_url)
        started = time.monotonic()
        assert (await c.get(f"/identities/{did}")).status_code == 404
        assert time.monotonic() - started < 0.2
        assert await relay.store.log_length() == before  # nothing changed
        # sync skips the backed-off peer; ingestion works, gossip does not block it
        assert await relay.sync_from_peers() == 0
        tokens = mixed_workload(30, seed=41, now_ms=PAST_MS)
        response = await c.post("/operations", json={"operations": tokens[:30]})
        assert response.status_code == 200
        assert all(r["status"] == "new" for r in response.json()["results"])


@pytest.mark.parametrize("fault", FAULTS)
async def test_faulty_peer_never_blocks_and_changes_nothing(
    fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    did, tokens = _identity_chain(40)
    caplog.set_level(logging.WARNING, "dfos_relay.peering")
    async with serve_on_loopback(faulty_peer(fault, tokens, hang_s=5)) as peer_url:
        async with relay_with_peer(peer_url) as relay:
            await _check_relay_survives(relay, peer_url, did)
            started = time.monotonic()
        assert time.monotonic() - started < 2.0  # shutdown flush is bounded
    assert any(peer_url in r.getMessage() for r in caplog.records)


async def test_unreachable_peer(caplog: pytest.LogCaptureFixture) -> None:
    did, _ = _identity_chain(42)
    caplog.set_level(logging.WARNING, "dfos_relay.peering")
    peer_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    async with relay_with_peer(peer_url) as relay:
        await _check_relay_survives(relay, peer_url, did)
    assert any(
        peer_url in r.getMessage() and "PeerUnreachable" in r.getMessage() for r in caplog.records
    )


async def test_a_slow_peer_does_not_starve_a_healthy_one() -> None:
    tokens = mixed_workload(60, seed=43, now_ms=PAST_MS)
    healthy = create_relay()
    async with (
        serve_on_loopback(healthy.app) as good_url,
        serve_on_loopback(faulty_peer("timeout", hang_s=5)) as slow_url,
    ):
        await healthy.ingest(tokens)
        async with relay_with_peer(slow_url, good_url) as relay:
            started = time.monotonic()
            assert await relay.sync_from_peers() >= len(tokens)
            assert time.monotonic() - started < 2.0


async def test_huge_response_is_cut_off_at_the_cap() -> None:
    from peer import PeerResponseTooLarge

    async with serve_on_loopback(faulty_peer("huge-page")) as url, httpx.AsyncClient() as http:
        client = HttpPeerClient(http, LIMITS)
        with pytest.raises(PeerResponseTooLarge) as info:
            await client.get_operation_log(url)
        assert info.value.peer_url == url
