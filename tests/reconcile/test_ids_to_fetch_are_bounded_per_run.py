"""A run collects at most ``ReconcileBounds.max_need`` ids to fetch (draft
section 9): a responder that names a frame full of fabricated ids every
round would otherwise have us hold ~1M of them (64 rounds of 512 KiB) and
ask for them in ~1,000 fetches. Past the bound the run stops collecting,
moves what it found and says it was cut short; fetching stops at the
first batch the peer serves none of; an honest difference larger than
the bound converges over successive runs."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from relay import Relay, create_relay
from relay.reconcile.initiator import ReconcileBounds
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.reconcile.hostile_responder import flood, hostile, id_list
from tests.support.relay_api import PAST_MS


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    r = create_relay(MemoryStore())
    async with r.running():
        yield r


class Refuser:
    """Serves nothing it is asked for, and counts the asking."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, cids: list[str]) -> dict[str, object]:
        self.requests += 1
        return {"operations": [], "missing": cids}


async def test_a_flood_of_fabricated_ids_stops_at_the_bound_with_default_bounds(
    relay: Relay,
) -> None:
    frame = ReconcileBounds().frame_limit
    refuser = Refuser()

    async def fabricate(_: bytes) -> bytes:
        return flood(frame)

    async with hostile(fabricate, refuser) as url:
        tracemalloc.start()
        try:
            report = await relay.reconcile(url, "pull")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 40 * 1024 * 1024, f"{peak / 1e6:.0f} MB"  # without the bound: ~370 MB
    assert refuser.requests == 1 and len(report.refused) == 1000  # without: ~1,050 and ~1M
    assert report.need == 100_000 and report.rounds < 64  # it stopped asking too
    error = report.error or ""
    assert "advertised 1000 ops it then did not serve (99000 more not asked for)" in error
    assert "more than 100000 ids to fetch in one run" in error


async def test_the_bound_on_ids_to_fetch_is_a_setting(relay: Relay) -> None:
    bounds = ReconcileBounds(frame_limit=8192, max_need=500, deadline_s=10)

    async def fabricate(_: bytes) -> bytes:
        return flood(bounds.frame_limit)

    async with hostile(fabricate) as url:
        report = await relay.reconcile(url, "pull", bounds=bounds)
    assert report.need == 500 and report.rounds == 2  # ~250 ids a frame
    assert "more than 500 ids to fetch in one run" in (report.error or "")


async def test_fetching_stops_at_the_first_batch_the_peer_serves_none_of(relay: Relay) -> None:
    advertised = [os.urandom(32) for _ in range(3000)]
    refuser = Refuser()

    async def claim(_: bytes) -> bytes:
        return id_list(advertised)

    async with hostile(claim, refuser) as url:
        report = await relay.reconcile(url, "pull")
    assert report.need == 3000 and refuser.requests == 1 and len(report.refused) == 1000
    assert report.error == (
        "peer advertised 1000 ops it then did not serve (2000 more not asked for)"
    )


async def test_a_batch_served_without_naming_the_missing_is_refused_all_the_same(
    relay: Relay,
) -> None:
    advertised = [os.urandom(32) for _ in range(5)]

    async def claim(_: bytes) -> bytes:
        return id_list(advertised)

    async with hostile(claim, lambda cids: {"operations": [], "missing": []}) as url:
        report = await relay.reconcile(url, "pull")
    assert len(report.refused) == 5
    assert report.error == "peer advertised 5 ops it then did not serve"


async def test_an_honest_difference_over_the_bound_converges_run_by_run() -> None:
    source, mirror = create_relay(MemoryStore()), create_relay(MemoryStore())
    bounds = ReconcileBounds(max_need=100)
    async with serve_on_loopback(source.app) as url, serve_on_loopback(mirror.app):
        await source.ingest(mixed_workload(400, seed=406, now_ms=PAST_MS))
        first = await mirror.reconcile(url, "pull", bounds=bounds)
        assert first.need == 100 and first.sequenced > 0
        assert "more than 100 ids to fetch in one run" in (first.error or "")
        runs = 1
        while (await mirror.reconcile(url, "pull", bounds=bounds)).error is not None:
            runs += 1
            assert runs < 30
        wanted = {e.cid for e in await source.store.read_seq_range(0, 10**9, 10**6)}
        held = {e.cid for e in await mirror.store.read_seq_range(0, 10**9, 10**6)}
        assert wanted <= held
