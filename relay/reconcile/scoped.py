"""The item set of a scope for reconciliation: every op of its effective
scope (intent plus closure) as a Negentropy item.

The serving side builds it per round, statelessly; rounds of one run come
close together, so the last few sets are kept per (scopeId, head seq): a
commit moves the head and so retires the entry, never serving a stale set.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from typing import Protocol

from relay.protocol.negentropy import VectorStorage, op_item
from relay.scope import Scope, ScopeReader, effective_scope
from stores.base import FeedEntry, OperationKind

CACHED_SETS = 8


class ScopedItemsStore(ScopeReader, Protocol):
    async def log_length(self) -> int: ...
    async def get_feed_epoch(self) -> str: ...
    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]: ...


class ScopedItems:
    def __init__(self, store: ScopedItemsStore, cached: int = CACHED_SETS) -> None:
        self._store = store
        self._cached = cached
        self._sets: OrderedDict[tuple[str, int, str], VectorStorage] = OrderedDict()

    async def storage(self, scope: Scope) -> VectorStorage:
        head = await self._store.log_length()
        # the epoch too: a purge keeps the head where it was, not the set
        key = (scope.scope_id, head, await self._store.get_feed_epoch())
        found = self._sets.get(key)
        if found is not None:
            self._sets.move_to_end(key)
            return found
        entries: list[FeedEntry] = []
        await effective_scope(self._store, scope, head, collect=entries)
        storage = VectorStorage(op_item(e.created_at_ms, e.cid) for e in entries)
        self._sets[key] = storage
        while len(self._sets) > self._cached:
            self._sets.popitem(last=False)
        return storage
