"""A scoped page of the global log (``GET /log?scope=...``): the effective
scope's entries in log order, each closure op before its dependants.

The cursor keeps ``/log``'s meaning: the CID of the last entry *scanned*,
so a page may hold fewer than ``limit`` entries (even none) with a cursor
to go on from; it is null once the scan reached the head, and
``scanned_to`` then names the last entry scanned (where a poller resumes).
``limit`` counts the entries served in log order; closure ops sent ahead of
a dependant (``late``) come on top of it, so every page makes progress. One
request scans at most ``scan_budget`` entries, so a narrow scope over a long
log costs each request a bounded amount. With ``checkpoints`` a page starts
from the closure the previous page ended at (see ``checkpoints``), so paging
through a scope costs each page its own length, not the scope's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from relay.loop_slices import Slices
from stores.base import FeedEntry, UnknownCursorError

from .checkpoints import Checkpoint, ClosureCheckpoints, TargetReader, targets_before
from .closure import EffectiveScope, PagedScopeReader, effective_scope_in_pages
from .model import Scope
from .tracker import Admitted, ScopeTracker

SCAN_BUDGET = 10_000
READ_PAGE = 500
CATCH_UP = SCAN_BUDGET  # the longest stretch from a checkpoint worth scanning again


class ScopedLogStore(PagedScopeReader, TargetReader, Protocol):
    async def log_length(self) -> int: ...
    async def get_feed_epoch(self) -> str: ...
    async def read_seq_range(
        self, after_seq: int, until_seq: int, limit: int
    ) -> list[FeedEntry]: ...


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
    checkpoints: ClosureCheckpoints | None = None,
) -> ScopedPage:
    """Raises ``UnknownCursorError`` for an ``after`` this log does not hold."""
    start = 0
    if after is not None:
        found = (await store.read_operations([after])).get(after)
        if found is None:
            raise UnknownCursorError(after)
        start = found.seq
    head = await store.log_length()
    epoch = await store.get_feed_epoch()
    tracker = ScopeTracker(store, await _closure_at(store, scope, start, epoch, checkpoints))
    entries: list[Admitted] = []
    served = 0  # in log order: what ``limit`` counts
    cursor: str | None = after
    position = start
    size = max(1, min(limit, READ_PAGE))  # a read's length: the page's, doubling while it is short
    while position < head and served < limit and position - start < scan_budget:
        batch = await store.read_seq_range(position, head, min(size, scan_budget))
        if not batch:
            break
        size = min(2 * size, READ_PAGE)
        await targets_before(store, tracker.effective, batch)
        for entry in batch:
            admitted = await tracker.admit([entry])
            entries.extend(admitted)
            served += sum(1 for a in admitted if not a.late)
            position, cursor = entry.seq, entry.cid
            if served >= limit or position - start >= scan_budget:
                break
    # kept only if no purge moved the epoch while the page was read
    if checkpoints is not None and position > start and epoch == await store.get_feed_epoch():
        checkpoints.keep(epoch, scope.scope_id, Checkpoint.of(position, tracker.effective))
    missing = tracker.effective.missing_json()
    return ScopedPage(entries, None if position >= head else cursor, cursor, missing)


async def _closure_at(
    store: ScopedLogStore,
    scope: Scope,
    seq: int,
    epoch: str,
    checkpoints: ClosureCheckpoints | None,
) -> EffectiveScope:
    """The effective scope as of ``seq``: from a checkpoint at or shortly
    before it when there is one, else computed from the log a page at a
    time, the loop let go between pages (a large scope's closure is seconds
    of reads and decoding, and a page request must not hold every other)."""
    checkpoint = None if checkpoints is None else checkpoints.nearest(epoch, scope.scope_id, seq)
    if checkpoint is None or seq - checkpoint.seq > CATCH_UP:
        return await effective_scope_in_pages(store, scope, seq, Slices().pause_when_due)
    tracker = ScopeTracker(store, EffectiveScope.of_intent(scope))
    checkpoint.resume(tracker.effective)
    position = checkpoint.seq
    while position < seq:
        batch = await store.read_seq_range(position, seq, READ_PAGE)
        if not batch:
            break
        await targets_before(store, tracker.effective, batch)
        await tracker.admit(batch)
        position = batch[-1].seq
    return tracker.effective
