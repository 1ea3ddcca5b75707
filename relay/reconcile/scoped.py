"""The item set of a scope for reconciliation: every op of its effective
scope (intent plus closure) as a Negentropy item.

The serving side answers each round statelessly, but a scope's set is
kept (the last few scopes) with the head and feed epoch it is current
with. A round at a later head brings it forward over the log since
(``scoped_build.catch_up``), not from the log's start: on a relay busy
ingesting the head moves between any two rounds, and building 20,000 ops
afresh was ~150 ms of a blocked loop per round. It is built afresh when
it is new, the epoch moved (a purge), the log is shorter, or the stretch
since is longer than the set (reading it again is then cheaper).

Either way the work is paced, a page of reads at a time, and work that
pauses takes ``pausing`` (a place among the few long rounds that may run
at once, or a 503), like a round. Rounds asking for one scope at once
wait on one build: the first brings the set forward, the others find it
current. The set is updated in place: a round under way sees ops added,
as rounds over the whole index do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Collection
from typing import Protocol

from relay.protocol.negentropy import Storage
from relay.scope import Scope
from stores.base import FeedEntry, OperationKind

from .pacing import Pauses
from .scoped_build import ScopeBuildStore, ScopedSet, build, catch_up

CACHED_SETS = 8
CATCH_UP = 10_000  # a stretch of the log always gone over rather than built afresh


class ScopedItemsStore(ScopeBuildStore, Protocol):
    async def log_length(self) -> int: ...
    async def get_feed_epoch(self) -> str: ...
    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]: ...


class ScopedItems:
    def __init__(self, store: ScopedItemsStore, cached: int = CACHED_SETS) -> None:
        self._store = store
        self._cached = cached
        self._sets: OrderedDict[str, tuple[str, ScopedSet]] = OrderedDict()  # by scopeId
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}  # one build per scope at once

    async def storage(
        self, scope: Scope, pausing: contextlib.AbstractContextManager[None] | None = None
    ) -> Storage:
        """``scope``'s items, current with the log now; ``pausing`` is entered
        before the work first lets the loop run other work."""
        key = scope.scope_id
        lock, users = self._turns.get(key, (asyncio.Lock(), 0))
        self._turns[key] = (lock, users + 1)
        try:
            async with lock:
                return await self._current(scope, pausing)
        finally:
            lock, users = self._turns[key]
            if users == 1:
                del self._turns[key]
            else:
                self._turns[key] = (lock, users - 1)

    async def _current(
        self, scope: Scope, pausing: contextlib.AbstractContextManager[None] | None
    ) -> Storage:
        key = scope.scope_id
        head = await self._store.log_length()
        # the epoch too: a purge keeps the head where it was, not the set
        epoch = await self._store.get_feed_epoch()
        kept = self._sets.pop(key, None)  # back at the end once current; dropped on failure
        with contextlib.ExitStack() as held:
            pause = Pauses(held, pausing)
            if kept is None or not _goes_on(kept, epoch, head):
                scoped = await build(self._store, scope, head, pause)
            else:
                scoped = kept[1]
                await catch_up(self._store, scoped, head, pause)
        self._sets[key] = (epoch, scoped)
        while len(self._sets) > self._cached:
            self._sets.popitem(last=False)
        return scoped.items


def _goes_on(kept: tuple[str, ScopedSet], epoch: str, head: int) -> bool:
    """The kept set can be brought forward to ``head``."""
    kept_epoch, scoped = kept
    if kept_epoch != epoch or head < scoped.head:
        return False
    return head - scoped.head <= max(CATCH_UP, scoped.items.size())
