"""A scoped page of the global log (``GET /log?scope=...``): the effective
scope's entries in log order, each closure op before its dependants.

The cursor keeps ``/log``'s meaning: the CID of the last entry *scanned*,
so a page may hold fewer than ``limit`` entries (even none) with a cursor
to go on from; it is null once the scan reached the head, and
``scanned_to`` then names the last entry scanned (where a poller resumes).
``limit`` counts the entries served in log order; closure ops sent ahead of
a dependant (``late``) come on top of it, so every page makes progress. One
request scans at most ``scan_budget`` entries, so a narrow scope over a long
log costs each request a bounded amount.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from stores.base import FeedEntry, OperationRecord, UnknownCursorError

from .closure import ScopeReader, effective_scope
from .model import Scope
from .tracker import Admitted, ScopeTracker

SCAN_BUDGET = 10_000
READ_PAGE = 500


class ScopedLogStore(ScopeReader, Protocol):
    async def log_length(self) -> int: ...
    async def read_seq_range(
        self, after_seq: int, until_seq: int, limit: int
    ) -> list[FeedEntry]: ...
    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]: ...


@dataclass(slots=True)
class ScopedPage:
    entries: list[Admitted]
    cursor: str | None
    scanned_to: str | None = None  # the last entry scanned (also when the cursor is null)
    missing: dict[str, list[str]] = field(default_factory=dict)  # closure members absent here


async def scoped_log_page(
    store: ScopedLogStore,
    scope: Scope,
    after: str | None,
    limit: int,
    scan_budget: int = SCAN_BUDGET,
) -> ScopedPage:
    """Raises ``UnknownCursorError`` for an ``after`` this log does not hold."""
    start = 0
    if after is not None:
        found = (await store.read_operations([after])).get(after)
        if found is None:
            raise UnknownCursorError(after)
        start = found.seq
    head = await store.log_length()
    tracker = ScopeTracker(store, await effective_scope(store, scope, start))
    entries: list[Admitted] = []
    served = 0  # in log order: what ``limit`` counts
    cursor: str | None = after
    position = start
    while position < head and served < limit and position - start < scan_budget:
        batch = await store.read_seq_range(position, head, min(READ_PAGE, scan_budget))
        if not batch:
            break
        for entry in batch:
            admitted = await tracker.admit([entry])
            entries.extend(admitted)
            served += sum(1 for a in admitted if not a.late)
            position, cursor = entry.seq, entry.cid
            if served >= limit or position - start >= scan_budget:
                break
    missing = tracker.effective.missing_json()
    return ScopedPage(entries, None if position >= head else cursor, cursor, missing)
