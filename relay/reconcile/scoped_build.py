"""A scope's item set built or brought forward a page of reads at a time,
the loop free between pages (``pause``).

``build`` is ``effective_scope_in_pages`` (the intent's chains, the
countersignatures of its ops, the identity chains they depend on, each as
pages of at most ``PAGE`` ops) with every op put in the set. ``catch_up``
goes on from a set built at an earlier head over the log since, in order:
a scope's closure at a position is a function of the log up to it, so this
is the set a build at the new head holds (``ScopeTracker``: a closure
identity that appears is read up to its dependant). Each step is a page of
reads and its items, a few ms.

Not checked: a purge while a build runs (the caller keys the set by the
feed epoch read before it, so the next round builds again).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from relay.protocol.negentropy import op_item
from relay.scope import EffectiveScope, Scope
from relay.scope.closure import PAGE, PagedScopeReader, Pause, effective_scope_in_pages
from relay.scope.tracker import ScopeTracker
from stores.base import FeedEntry

from .tree import FingerprintTree


class ScopeBuildStore(PagedScopeReader, Protocol):
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
    items = FingerprintTree()

    def add(entries: list[FeedEntry]) -> None:
        for entry in entries:
            items.insert(op_item(entry.created_at_ms, entry.cid))

    eff = await effective_scope_in_pages(store, scope, head, pause, add, page)
    return ScopedSet(head, eff, items)


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
