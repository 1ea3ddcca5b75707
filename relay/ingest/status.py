"""Explained op status and the pending-buffer overview (additive to v0.7.1).

An op's status is read from what the pipeline leaves behind, with this
precedence: ``sequenced`` (it is in the log: seq and chain), ``waiting`` (it
is in the raw-op buffer: the dependency it waits for and since when),
``rejected`` (a recent rejection note: reason and detail), ``unknown``.
Reads go buffer, then log, then notes: an op that moves from the buffer to
the log between two reads is still found in the log, and once sequenced an
op is always reported so (a later forged token under its CID cannot hide it).

An op the relay received but has not attempted yet (another worker is
verifying it, or a restart will drain it) is ``waiting`` with no dependency.

The overview counts the buffer by dependency kind and age bucket and names
the oldest waiting op; it is cached for ``OVERVIEW_TTL_MS`` so a busy route
or scrape costs one aggregate read per interval, however often it is asked.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stores.base import DEPENDENCY_KINDS, OpLocation, PendingOp, RejectionNote, StatusStore

Clock = Callable[[], int]

OVERVIEW_TTL_MS = 1000
# Age buckets of waiting ops: (label, lower bound in seconds), youngest first.
AGE_BUCKETS: tuple[tuple[str, int], ...] = (
    ("<1m", 0),
    ("1m-1h", 60),
    ("1h-1d", 3600),
    (">=1d", 86400),
)
UNKNOWN_AGE = "unknown"  # waiting since before the relay recorded such times
# The youngest bucket's cutoff: no upper bound, so an op parked by a clock a
# little ahead of ours (another host's, or ours before a step back) counts as
# young, not unknown. The largest BIGINT, so every store takes it.
_ANY_SINCE_MS = 2**63 - 1


class OpState(enum.StrEnum):
    SEQUENCED = "sequenced"
    WAITING = "waiting"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class OpStatus:
    cid: str
    state: OpState
    location: OpLocation | None = None  # sequenced
    pending: PendingOp | None = None  # waiting
    note: RejectionNote | None = None  # rejected


def explain(
    cid: str,
    location: OpLocation | None,
    pending: PendingOp | None,
    note: RejectionNote | None,
) -> OpStatus:
    """The status of ``cid`` from what each read found (the precedence rule)."""
    if location is not None:
        return OpStatus(cid, OpState.SEQUENCED, location=location)
    if pending is not None:
        return OpStatus(cid, OpState.WAITING, pending=pending)
    if note is not None:
        return OpStatus(cid, OpState.REJECTED, note=note)
    return OpStatus(cid, OpState.UNKNOWN)


@dataclass(frozen=True, slots=True)
class DependencyAges:
    count: int
    ages: dict[str, int]  # AGE_BUCKETS labels (and UNKNOWN_AGE) -> count


@dataclass(frozen=True, slots=True)
class PendingOverview:
    at_ms: int
    by_dependency: dict[str, DependencyAges]  # "op", "did"
    unverified: int  # buffered, not yet attempted
    oldest: PendingOp | None
    copies: int = 0  # other tokens of buffered CIDs, waiting beside them

    @property
    def total(self) -> int:
        return self.unverified + sum(d.count for d in self.by_dependency.values())

    @property
    def oldest_age_s(self) -> float:
        if self.oldest is None or self.oldest.since_ms is None:
            return 0.0
        return max(0, self.at_ms - self.oldest.since_ms) / 1000


class OpStatusService:
    def __init__(self, store: StatusStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._overview: PendingOverview | None = None

    async def explain_many(self, cids: Sequence[str]) -> list[OpStatus]:
        """``result[i]`` explains ``cids[i]`` (duplicates answered per position)."""
        wanted = set(cids)
        pending = await self._store.find_buffered(wanted)
        locations = await self._store.locate_operations(wanted)
        notes = await self._store.get_rejection_notes(wanted - locations.keys() - pending.keys())
        return [explain(c, locations.get(c), pending.get(c), notes.get(c)) for c in cids]

    async def overview(self) -> PendingOverview:
        now = self._clock()
        cached = self._overview
        if cached is not None and 0 <= now - cached.at_ms < OVERVIEW_TTL_MS:
            return cached
        cutoffs = [now - lower_s * 1000 if lower_s else _ANY_SINCE_MS for _, lower_s in AGE_BUCKETS]
        summary = await self._store.pending_summary(cutoffs)
        by_dependency = {
            kind: _ages(summary.waiting.get(kind, 0), summary.older.get(kind, []))
            for kind in DEPENDENCY_KINDS
        }
        self._overview = PendingOverview(
            now, by_dependency, summary.unverified, summary.oldest, summary.copies
        )
        return self._overview


def _ages(count: int, older: Sequence[int]) -> DependencyAges:
    """Buckets from cumulative "at least this old" counts (oldest bound last)."""
    older = list(older) + [0] * (len(AGE_BUCKETS) - len(older))
    ages = {
        label: older[i] - (older[i + 1] if i + 1 < len(AGE_BUCKETS) else 0)
        for i, (label, _) in enumerate(AGE_BUCKETS)
    }
    ages[UNKNOWN_AGE] = count - older[0]
    return DependencyAges(count, ages)
