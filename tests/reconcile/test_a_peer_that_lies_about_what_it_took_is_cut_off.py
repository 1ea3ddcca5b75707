"""A peer's ``new`` answer to a push is its word: an honest peer's item set
is its log, so what it took is in its set by the next run. A peer that
names as lacking again the ops it answered ``new`` to is not pushed them
again, they are no progress, and when they are many the run fails: logged
and backed off, not followed at once (``relay.reconcile.answers``). Two
honest relays reconciling again and again never fail so."""

from __future__ import annotations

import asyncio
import time

from peer.base import PeerConfig
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.reconcile.answers import TakenAtPeers
from relay.reconcile.initiator import ReconcileBounds
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.reconcile.hostile_responder import hostile, lacks_everything
from tests.reconcile.test_ids_to_push_are_bounded_per_run import Taker
from tests.support.relay_api import PAST_MS

BACKOFF_S = 10.0  # longer than each test: a failed run is not run again here


def _relay(peer_url: str, bounds: ReconcileBounds, interval_s: float | None) -> Relay:
    peer = PeerConfig(peer_url, gossip=False, read_through=False, sync=False, reconcile=True)
    config = PeeringConfig(
        reconcile_interval_s=interval_s,
        backoff_base_s=BACKOFF_S,
        backoff_max_s=BACKOFF_S,
        reconcile_bounds=bounds,
    )
    return create_relay(MemoryStore(), peering=build_peering([peer], None, config))


def _peering(relay: Relay) -> Peering:
    assert isinstance(relay.peering, Peering)
    return relay.peering


def _runs(relay: Relay, url: str, result: str) -> int:
    sample = relay.metrics.registry.get_sample_value
    return int(sample("dfos_relay_reconcile_runs_total", {"peer": url, "result": result}) or 0)


async def _claim(_: bytes) -> bytes:
    return lacks_everything()


async def test_a_peer_that_takes_everything_and_still_lacks_it_is_backed_off() -> None:
    liar = Taker("new")  # lacks everything, takes everything, lacks it still
    async with hostile(_claim, submit=liar) as url:
        relay = _relay(url, ReconcileBounds(max_have=100), interval_s=None)
        async with serve_on_loopback(relay.app):
            peering = _peering(relay)
            while url not in peering.repair.last:  # the run after start: our own ops
                await asyncio.sleep(0.02)
            posts, ops = liar.posts, liar.ops
            await relay.ingest(mixed_workload(1200, seed=91, now_ms=PAST_MS))
            peering.repair.request(url)
            await asyncio.sleep(1.5)
            # before: the run and its 10 follow-ons, 11 posts of 100, no backoff
            assert (liar.posts - posts, liar.ops - ops) == (1, 100)
            assert peering.backoff.failures(url) == 1
            last = peering.repair.last[url]
            assert not last.ok and not last.progressed and not last.cut_short
            assert (last.pushed, last.taken_before) == (0, 100)
            assert last.error is not None
            assert last.error.startswith(
                "peer named as lacking 100 of 100 ops it answered as new to an earlier push"
            )
            link = peering.ledger.get(url, "in")  # a failure, in the ledger
            assert link.failures == 1 and link.last_error == last.error


async def test_what_it_took_is_pushed_again_once_forgotten() -> None:
    relay = create_relay(MemoryStore())
    now = [0.0]
    relay.taken_by_peers = TakenAtPeers(ttl_s=60, clock=lambda: now[0])
    liar = Taker("new")
    async with relay.running(), hostile(_claim, submit=liar) as url:
        await relay.ingest(mixed_workload(300, seed=92, now_ms=PAST_MS))
        first = await relay.reconcile(url, "push")
        assert first.ok and first.accepted == first.pushed == first.have == liar.ops > 200

        again = await relay.reconcile(url, "push")
        assert not again.ok and not again.progressed
        assert (again.pushed, again.taken_before) == (0, first.have)
        assert liar.ops == first.have  # before: every op again

        now[0] = 61.0  # forgotten: it may have lost them (a purge, a memory store)
        late = await relay.reconcile(url, "push")
        assert late.ok and late.pushed == first.have


def test_a_few_ops_named_again_are_no_failure() -> None:
    assert not TakenAtPeers.lying(99, 99)  # less than a push: a purge, a race
    assert not TakenAtPeers.lying(100, 201)  # less than half of what it lacks
    assert TakenAtPeers.lying(100, 200)
    assert TakenAtPeers.lying(100_000, 100_000)


async def test_honest_relays_reconciling_again_and_again_never_fail() -> None:
    mirror = create_relay(MemoryStore())
    async with serve_on_loopback(mirror.app) as url:
        # a difference of 4 runs and more, each followed at once, every 0.1 s
        relay = _relay(url, ReconcileBounds(max_have=100, max_need=100), interval_s=0.1)
        async with serve_on_loopback(relay.app):
            await mirror.ingest(mixed_workload(150, seed=94, now_ms=PAST_MS))
            await relay.ingest(mixed_workload(400, seed=93, now_ms=PAST_MS))
            started = time.monotonic()
            for seed in range(95, 99):  # new ops on either side meanwhile
                await asyncio.sleep(0.4)
                side = relay if seed % 2 else mirror
                await side.ingest(mixed_workload(120, seed=seed, now_ms=PAST_MS + seed))
            held, pushed = await _cids(relay), await _cids(mirror)
            while held != pushed:
                assert time.monotonic() - started < 20, "not converging"
                await asyncio.sleep(0.1)
                held, pushed = await _cids(relay), await _cids(mirror)
            await asyncio.sleep(0.5)  # and runs after it converged
            assert _runs(relay, url, "ok") > 5 and _runs(relay, url, "cut-short") >= 4
            assert _runs(relay, url, "failed") == 0
            assert _peering(relay).backoff.failures(url) == 0
            assert relay.taken_by_peers.count(url) > 400  # it was checked against


async def _cids(relay: Relay) -> set[str]:
    return {e.cid for e in await relay.store.read_seq_range(0, 10**9, 10**6)}
