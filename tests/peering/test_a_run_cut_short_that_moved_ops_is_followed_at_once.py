"""A reconcile run cut short by a bound on its size (ids to fetch or push,
rounds) that moved ops is not a failure: the next run follows at once, up
to ``reconcile_follow_ons`` in a row, so an honest difference larger than
one run converges in as many runs without backoff pauses between them. A
run cut short that moved nothing is still backed off. Real relays on
loopback, the follower reconciling on its own schedule."""

from __future__ import annotations

import asyncio
import time

from peer.base import PeerConfig
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.reconcile.initiator import ReconcileBounds
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.reconcile.hostile_responder import hostile, random_fingerprint
from tests.support.relay_api import PAST_MS

BACKOFF_S = 10.0  # a failed run waits 5..10 s: longer than the whole convergence here


def _config(bounds: ReconcileBounds) -> PeeringConfig:
    return PeeringConfig(
        reconcile_interval_s=None,  # the run after start and its follow-ons only
        backoff_base_s=BACKOFF_S,
        backoff_max_s=BACKOFF_S,
        reconcile_bounds=bounds,
    )


def _follower(url: str, bounds: ReconcileBounds) -> Relay:
    peer = PeerConfig(url, gossip=False, read_through=False, sync=False, reconcile=True)
    return create_relay(MemoryStore(), peering=build_peering([peer], None, _config(bounds)))


def _peering(relay: Relay) -> Peering:
    assert isinstance(relay.peering, Peering)
    return relay.peering


async def _cids(relay: Relay) -> set[str]:
    return {e.cid for e in await relay.store.read_seq_range(0, 10**9, 10**6)}


async def test_an_honest_difference_over_the_bound_converges_without_backoff() -> None:
    source = create_relay(MemoryStore())
    async with serve_on_loopback(source.app) as url:
        await source.ingest(mixed_workload(400, seed=408, now_ms=PAST_MS))
        wanted = await _cids(source)
        follower = _follower(url, ReconcileBounds(max_need=100))  # 5 runs for ~400 ops
        async with serve_on_loopback(follower.app):
            started = time.monotonic()
            while not wanted <= await _cids(follower):
                # without follow-ons: run 2 waits out a backoff of 5..10 s
                assert time.monotonic() - started < BACKOFF_S / 2, "converging paused"
                await asyncio.sleep(0.05)
            repair = _peering(follower).repair
            assert _peering(follower).backoff.failures(url) == 0
            last = repair.last[url]
            assert last.ok and not last.cut_short, last.error


async def test_follow_ons_are_bounded_in_number() -> None:
    source = create_relay(MemoryStore())
    async with serve_on_loopback(source.app) as url:
        await source.ingest(mixed_workload(400, seed=409, now_ms=PAST_MS))
        bounds = ReconcileBounds(max_need=50)  # 9 runs for ~400 ops
        peer = PeerConfig(url, gossip=False, read_through=False, sync=False, reconcile=True)
        config = PeeringConfig(
            reconcile_interval_s=None, reconcile_bounds=bounds, reconcile_follow_ons=2
        )
        follower = create_relay(MemoryStore(), peering=build_peering([peer], None, config))
        async with serve_on_loopback(follower.app):
            started = time.monotonic()
            while _runs(follower, url) < 3:  # the run after start and its two follow-ons
                assert time.monotonic() - started < 20
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            assert _runs(follower, url) == 3  # then it waits (for the interval: none here)
            assert _runs(follower, url, "cut-short") == 3
            assert _peering(follower).backoff.failures(url) == 0


def _runs(relay: Relay, url: str, result: str | None = None) -> int:
    results = [result] if result else ["ok", "cut-short", "failed"]
    sample = relay.metrics.registry.get_sample_value
    return sum(
        int(sample("dfos_relay_reconcile_runs_total", {"peer": url, "result": r}) or 0)
        for r in results
    )


async def test_the_rest_of_a_full_run_cut_short_is_for_the_next_full_run() -> None:
    source = create_relay(MemoryStore())
    async with serve_on_loopback(source.app) as url:
        await source.ingest(mixed_workload(400, seed=410, now_ms=PAST_MS))  # created long ago
        wanted = await _cids(source)
        peer = PeerConfig(url, gossip=False, read_through=False, sync=False, reconcile=True)
        config = PeeringConfig(
            reconcile_interval_s=0.3,  # full every 12th: 3.6 s apart
            reconcile_bounds=ReconcileBounds(max_need=100),
            reconcile_follow_ons=0,
        )
        follower = create_relay(MemoryStore(), peering=build_peering([peer], None, config))
        async with serve_on_loopback(follower.app):
            started = time.monotonic()
            while not wanted <= await _cids(follower):
                # with windowed runs (of the last 24 h: none of these ops) after the
                # first full one, each further 100 waited 3.6 s for a full run
                assert time.monotonic() - started < 3.6, "the rest waited for a full run"
                await asyncio.sleep(0.05)


async def test_a_run_cut_short_that_moved_nothing_is_backed_off() -> None:
    runs = 0

    async def never_agrees(_: bytes) -> bytes:
        nonlocal runs
        runs += 1
        return random_fingerprint()

    async with hostile(never_agrees) as url:
        follower = _follower(url, ReconcileBounds(max_rounds=3))
        async with serve_on_loopback(follower.app):
            await asyncio.sleep(1.0)
            peering = _peering(follower)
            assert peering.backoff.failures(url) == 1 and peering.backoff.delay(url) > 1
            last = peering.repair.last[url]
            assert last.cut_short and not last.progressed
    assert runs == 3  # one run of three rounds, then the backoff
