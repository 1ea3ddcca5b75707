"""A scoped mirror's guard judges a batch that holds an op outside its scope
(what a hostile peer sends page after page) at the cost of the batch and of
what its log committed since, not of the scope: the closure is computed
over the whole scope once, then brought forward. It still answers as it
did: an identity a newly committed op needs is kept from then on; after a
purge or a reset (a new epoch) it computes the closure afresh."""

from __future__ import annotations

from collections.abc import Collection

from relay import create_relay
from relay.scope import Scope, ScopeGuard
from relay.testing.workload import Actor, ContentHandle, WorkloadBuilder
from stores.base import FeedEntry, OperationKind
from stores.memory import MemoryStore
from tests.scope.counting_store import CountingStore
from tests.support.relay_api import PAST_MS

ARTIFACTS = 300


class Scene:
    """An owner with many artifacts and a content chain (the scope), a
    delegate the chain does not need yet, and an outsider's artifacts."""

    def __init__(self) -> None:
        b = self.builder = WorkloadBuilder(seed=71, start_ms=PAST_MS, step_ms=5)
        self.owner: Actor = b.identity()
        self.delegate: Actor = b.identity()
        self.delegate_genesis = b.tokens[-1]
        self.chain: ContentHandle = b.content_create(self.owner)
        for _ in range(ARTIFACTS):
            b.artifact(self.owner)
        self.held = list(b.tokens)
        outsider = b.identity()
        self.outside = [b.tokens[-1]]
        for _ in range(20):
            b.artifact(outsider)
            self.outside.append(b.tokens[-1])
        grant = b.write_credential(self.owner, self.delegate, self.chain.content_id)
        b.content_update(self.chain, self.delegate, authorization=grant)
        self.delegate_write = b.tokens[-1]
        self.scope = Scope.of([self.owner.did, self.chain.content_id])


async def test_a_batch_outside_the_scope_reads_no_more_than_what_was_committed_since() -> None:
    scene = Scene()
    store = CountingStore()
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest(scene.held)
        guard = ScopeGuard(store, scene.scope)
        store.rows = 0
        first = await guard.split([scene.delegate_genesis])
        assert first.kept == [] and store.rows > ARTIFACTS  # the closure, once
        rows = []
        for token in scene.outside:
            store.rows = 0
            split = await guard.split([token])
            assert split.kept == [] and len(split.outside) == 1
            rows.append(store.rows)
        assert rows == [0] * len(scene.outside)
        # a write by the delegate is committed (another path, a client): the
        # next batch reads that one entry, and the delegate is in the closure
        await relay.ingest([scene.delegate_write])
        store.rows = 0
        assert (await guard.split(scene.outside[:1])).kept == []
        assert store.rows == 1
        assert (await guard.split([scene.delegate_genesis])).kept == [scene.delegate_genesis]
        assert guard.rebuilds == 1


class Restored:
    """The guard's view of a relay's log, as of the ``store`` it runs on now:
    ``store`` is replaced by a restored one (a backup, or a Postgres server
    that lost its last commits), whose log has the same length but other
    ops at its end, and a new epoch."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def log_length(self) -> int:
        return await self.store.log_length()

    async def get_feed_epoch(self) -> str:
        return await self.store.get_feed_epoch()

    async def read_seq_range(self, after_seq: int, until_seq: int, limit: int) -> list[FeedEntry]:
        return await self.store.read_seq_range(after_seq, until_seq, limit)

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        return await self.store.read_chain_entries(chain_id, kinds, until_seq)

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        return await self.store.read_chains_entries_after(
            chain_ids, kinds, after_seq, until_seq, limit
        )


async def test_a_log_of_a_new_epoch_has_the_closure_computed_afresh() -> None:
    """Same length, other ops at the end: only the epoch tells the guard
    that the positions it brought its closure to hold other ops now."""
    scene = Scene()
    before, after = CountingStore(), CountingStore()
    first, restored = create_relay(before), create_relay(after)
    async with first.running(), restored.running():
        await first.ingest(scene.held + scene.outside[:2])
        await restored.ingest([*scene.held, scene.delegate_write, scene.outside[0]])
        assert await before.log_length() == await after.log_length()
        log = Restored(before)
        guard = ScopeGuard(log, scene.scope)
        assert (await guard.split([scene.delegate_genesis])).kept == []
        log.store = after
        assert (await guard.split([scene.delegate_genesis])).kept == [scene.delegate_genesis]
        assert guard.rebuilds == 2 and after.rows > ARTIFACTS
