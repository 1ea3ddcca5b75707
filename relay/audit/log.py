"""Log positions as an audit sees them: gapless from 1, each held once.

Positions come in (seq, CID) order. A position missing from the log is a
gap unless a purge recorded it (a purge removes ops and keeps their
positions accounted for); a position or a CID held twice is a duplicate.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Collection
from dataclasses import dataclass, field

from .findings import Finding


@dataclass(slots=True)
class LogPositions:
    purged: Collection[int]
    last: int = 0
    cids: set[str] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)
    _sorted_purged: list[int] | None = None

    def accept(self, seq: int, cid: str) -> bool:
        """Record one row; False when it duplicates one already seen (skip it)."""
        if seq == self.last:
            self.findings.append(Finding("log-duplicate", cid, "a second op at this position", seq))
            return False
        if cid in self.cids:
            self.findings.append(Finding("log-duplicate", cid, "this CID is stored again", seq))
            return False
        if seq > self.last + 1:
            self._gap(self.last + 1, seq - 1)
        self.last = seq
        self.cids.add(cid)
        return True

    def _gap(self, first: int, last: int) -> None:
        """Report the runs of ``first..last`` no purge accounts for: work in
        the purged positions inside, not in the width of the gap (a
        tampered position may be 10**12)."""
        if self._sorted_purged is None:
            self._sorted_purged = sorted(self.purged)
        purged = self._sorted_purged
        start = first
        for seq in purged[bisect_left(purged, first) : bisect_right(purged, last)]:
            if seq > start:
                self._report(start, seq - 1)
            start = seq + 1
        if start <= last:
            self._report(start, last)

    def _report(self, first: int, last: int) -> None:
        where = f"{first}" if first == last else f"{first}..{last}"
        detail = f"no op at position {where} and no purge recorded for it"
        self.findings.append(Finding("log-gap", f"positions {where}", detail, first))
