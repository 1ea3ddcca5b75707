"""Reconciliation keeps working through what a live relay meets: ops dated
before 1970 (the wire's timestamps are unsigned: they count as 0 on every
relay), a purge while the index is being built (rounds waiting on the build
are not cancelled), a store error during the build (the next round builds
again), a purge under a scoped mirror (the scope's cached set is not
served stale), and ops so large that a batch of them passes the response cap
(fetched in halves)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from relay import Relay, create_relay
from relay.config import RelayConfig
from relay.reconcile.index import FingerprintIndex
from relay.reconcile.initiator import ReconcileBounds
from relay.scope import parse_scope
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder, mixed_workload
from stores.base import StoreError
from stores.memory import MemoryStore
from stores.sqlite import SqliteStore
from tests.support.relay_api import PAST_MS
from tests.support.whole_purge import plan_purge


async def _cids(relay: Relay) -> set[str]:
    return {e.cid for e in await relay.store.read_seq_range(0, 10**9, 10**6)}


async def test_ops_dated_before_1970_reconcile() -> None:
    b = WorkloadBuilder(seed=401, start_ms=-10_000_000, step_ms=1000)
    for _ in range(12):
        b.rotate(b.identity())
    a, other = create_relay(MemoryStore()), create_relay(MemoryStore())
    async with serve_on_loopback(a.app) as url_a, serve_on_loopback(other.app) as url_b:
        assert {r.status.value for r in await a.ingest(b.tokens)} == {"new"}
        pulled = await other.reconcile(url_a, "pull")
        assert pulled.error is None and pulled.sequenced >= len(b.tokens)
        pushed = await a.reconcile(url_b, "push")  # our side splits them too
        assert pushed.error is None
        assert await _cids(a) <= await _cids(other)


async def _sqlite_with_ops(path: Path) -> SqliteStore:
    store = SqliteStore(path)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest(mixed_workload(60, seed=402, now_ms=PAST_MS))
    await store.open()
    return store


async def test_a_purge_while_the_index_builds_does_not_cancel_its_waiters(tmp_path: Path) -> None:
    store = await _sqlite_with_ops(tmp_path / "relay.db")
    try:
        index = FingerprintIndex(store)
        index.start()
        waiting = asyncio.create_task(index.ready())
        await asyncio.sleep(0)  # the build is under way (SQLite reads off the loop)
        index.invalidate()  # what a purge does
        tree = await asyncio.wait_for(waiting, 30)
        assert tree.size() == await store.log_length()
    finally:
        await store.close()


async def test_a_store_error_during_the_build_is_retried_by_the_next_round(
    tmp_path: Path,
) -> None:
    store = await _sqlite_with_ops(tmp_path / "relay.db")
    head = await store.log_length()
    await store.close()  # the store is away while the index builds
    index = FingerprintIndex(store)
    index.start()
    with pytest.raises(StoreError):
        await index.ready()
    await store.open()  # back
    try:
        assert (await asyncio.wait_for(index.ready(), 30)).size() == head
    finally:
        await store.close()


async def test_a_scoped_mirror_is_not_served_what_a_purge_removed() -> None:
    b = WorkloadBuilder(seed=403, start_ms=PAST_MS)
    alice, mallory = b.identity(), b.identity()
    chain = b.content_create(alice)
    b.content_update(chain, mallory, authorization=b.write_credential(alice, mallory))
    source = create_relay(MemoryStore())
    scope = parse_scope(chain.content_id)
    async with serve_on_loopback(source.app) as url:
        await source.ingest(b.tokens)
        first = create_relay(MemoryStore())
        assert (await first.reconcile(url, "pull", scope=scope)).error is None
        head = await source.store.log_length()
        async with source.store.moderating() as session:
            await session.apply_moderation(await plan_purge(source.store, mallory.did, PAST_MS))
        await source.forget_purged()
        assert await source.store.log_length() == head  # the head stays where it was
        fresh = create_relay(MemoryStore())
        report = await fresh.reconcile(url, "pull", scope=scope)
        assert report.error is None, report.error
        assert await _cids(fresh) <= await _cids(source)


async def test_large_ops_are_pulled_in_answers_under_the_response_cap() -> None:
    """450 artifacts of ~20 KB: one answer for all of them would pass the
    peer client's 8 MiB cap, so they are fetched in halves."""
    b = WorkloadBuilder(seed=404, start_ms=PAST_MS, step_ms=1000)
    actors = [b.identity() for _ in range(5)]
    for i in range(450):
        b.artifact(actors[i % 5], name="n" * 15_000)
    assert sum(map(len, b.tokens)) > 8 * 1024 * 1024
    source, mirror = create_relay(MemoryStore()), create_relay(MemoryStore())
    async with serve_on_loopback(source.app) as url, serve_on_loopback(mirror.app):
        await source.ingest(b.tokens)
        report = await mirror.reconcile(url, "pull")
        assert report.error is None, report.error
        assert await _cids(source) <= await _cids(mirror)


async def test_runs_cut_short_by_the_round_bound_still_converge_run_by_run() -> None:
    """A peer with a small frame limit needs many rounds for a large
    difference: each run that runs out of rounds still moves what it found,
    so the next gets further, and a few runs converge."""
    source = create_relay(MemoryStore(), config=RelayConfig(sync_frame_limit=4096))
    mirror = create_relay(MemoryStore())
    bounds = ReconcileBounds(max_rounds=3, frame_limit=4096)
    async with serve_on_loopback(source.app) as url, serve_on_loopback(mirror.app):
        await source.ingest(mixed_workload(400, seed=405, now_ms=PAST_MS))
        first = await mirror.reconcile(url, "pull", bounds=bounds)
        assert "no agreement after 3 rounds" in (first.error or "") and first.sequenced > 0
        for _ in range(30):
            if (await mirror.reconcile(url, "pull", bounds=bounds)).error is None:
                break
        assert await _cids(source) <= await _cids(mirror)


async def test_purges_in_a_row_make_one_more_build_and_stop_ends_it(tmp_path: Path) -> None:
    store = await _sqlite_with_ops(tmp_path / "relay.db")
    try:
        index = FingerprintIndex(store)
        index.start()
        for _ in range(10):
            index.invalidate()
        builds = [t for t in asyncio.all_tasks() if t.get_name().startswith("fingerprint index")]
        assert len(builds) == 1  # the one under way goes on once more, not ten times
        assert (await asyncio.wait_for(index.ready(), 30)).size() == await store.log_length()
        index.invalidate()
        await index.stop()
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("fingerprint")]
    finally:
        await store.close()
