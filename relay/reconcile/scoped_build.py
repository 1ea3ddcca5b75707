"""A scope's item set built or brought forward a page of reads at a time,
the loop free between pages (``pause``).

``build`` is ``effective_scope`` read in pages: the intent's chains, the
countersignatures of its ops, the identity chains they depend on, each as
pages of at most ``PAGE`` ops. ``catch_up`` goes on from a set built at an
earlier head over the log since, in order: a scope's closure at a position
is a function of the log up to it, so this is the set a build at the new
head holds (``ScopeTracker``: a closure identity that appears is read up to
its dependant). Each step is a page of reads and its items, a few ms.

Not checked: a purge while a build runs (the caller keys the set by the
feed epoch read before it, so the next round builds again).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

from relay.protocol.negentropy import op_item
from relay.scope import EffectiveScope, Scope, ScopeReader
from relay.scope.closure import dependencies
from relay.scope.tracker import ScopeTracker
from stores.base import FeedEntry, OperationKind

from .tree import FingerprintTree

PAGE = 500  # ops (or chains) per read: a step of ~4 ms (a FeedEntry and a tree insert each)
FIRST_PAGE = 100

_INTENT_DID_KINDS: tuple[OperationKind, ...] = ("identity-op", "beacon", "artifact")
_IDENTITY: tuple[OperationKind, ...] = ("identity-op",)
_CONTENT: tuple[OperationKind, ...] = ("content-op",)
_COUNTERSIGN: tuple[OperationKind, ...] = ("countersign",)

Pause = Callable[[], Awaitable[None]]


class ScopeBuildStore(ScopeReader, Protocol):
    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]: ...

    async def read_seq_range(
        self, after_seq: int, until_seq: int, limit: int
    ) -> list[FeedEntry]: ...


@dataclass(slots=True)
class ScopedSet:
    """A scope's items as of ``head`` (and the closure that found them)."""

    head: int
    effective: EffectiveScope
    items: FingerprintTree

    def add(self, entries: Iterable[FeedEntry]) -> None:
        for entry in entries:
            self.items.insert(op_item(entry.created_at_ms, entry.cid))


async def build(
    store: ScopeBuildStore, scope: Scope, head: int, pause: Pause, page: int = PAGE
) -> ScopedSet:
    """The set of ``scope`` over the log up to ``head``."""
    built = ScopedSet(head, EffectiveScope.of_intent(scope), FingerprintTree())
    eff = built.effective
    needed: set[str] = set()
    intent = ((scope.dids, _INTENT_DID_KINDS), (scope.content_ids, _CONTENT))
    for chains, kinds in intent:
        async for entries in _pages(store, chains, kinds, head, pause, page):
            for entry in entries:
                eff.targets.add(entry.cid)
                needed |= dependencies(entry)
            built.add(entries)
    # a countersignature's chain is its target's CID
    async for entries in _pages(store, sorted(eff.targets), _COUNTERSIGN, head, pause, page):
        for entry in entries:
            needed |= dependencies(entry)
        built.add(entries)
    dids = sorted(needed - eff.identities)
    held: set[str] = set()
    async for entries in _pages(store, dids, _IDENTITY, head, pause, page):
        held.update(entry.chain_id for entry in entries)
        built.add(entries)
    for did in dids:
        eff.identities.add(did)
        if did not in held:
            eff.note_missing("identity", did)
    return built


async def catch_up(
    store: ScopeBuildStore, built: ScopedSet, head: int, pause: Pause, page: int = PAGE
) -> None:
    """``built`` brought forward to ``head`` in place. ``built.head`` moves
    after each page; one that fails part way is left inconsistent, so the
    caller drops it."""
    tracker = ScopeTracker(store, built.effective)
    while built.head < head:
        entries = await store.read_seq_range(built.head, head, page)
        if not entries:
            break
        built.add(admitted.entry for admitted in await tracker.admit(entries))
        built.head = entries[-1].seq
        if built.head < head:
            await pause()
    built.head = max(built.head, head)


async def _pages(
    store: ScopeBuildStore,
    chain_ids: Collection[str],
    kinds: Collection[OperationKind],
    head: int,
    pause: Pause,
    page: int,
) -> AsyncIterator[list[FeedEntry]]:
    """The ops of ``chain_ids`` up to ``head``, ``page`` chains and ops at a
    time, pausing after each full page. The first read is short: it runs
    before ``pause`` takes a place, in every request at once, and a small
    scope is read in it alone."""
    ids = list(chain_ids)
    limit = min(page, FIRST_PAGE)
    for at in range(0, len(ids), page):
        chunk = ids[at : at + page]
        after = 0
        while True:
            entries = await store.read_chains_entries_after(chunk, kinds, after, head, limit)
            if entries:
                yield entries
            if len(entries) < limit:
                break
            after, limit = entries[-1].seq, page
            await pause()
        if at + page < len(ids):
            await pause()  # a page of chains read, even with nothing in them, is a step
