"""Log positions as an audit sees them: gapless from 1, each held once.

Positions come in (seq, CID) order. A position missing from the log is a
gap unless a purge recorded it (a purge removes ops and keeps their
positions accounted for); a position or a CID held twice is a duplicate.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from .findings import Finding


@dataclass(slots=True)
class LogPositions:
    purged: Collection[int]
    last: int = 0
    cids: set[str] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)

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
        run: list[int] = []
        for seq in range(first, last + 1):
            if seq in self.purged:
                self._report(run)
                run = []
            else:
                run.append(seq)
        self._report(run)

    def _report(self, run: list[int]) -> None:
        if not run:
            return
        where = f"{run[0]}" if len(run) == 1 else f"{run[0]}..{run[-1]}"
        detail = f"no op at position {where} and no purge recorded for it"
        self.findings.append(Finding("log-gap", f"positions {where}", detail, run[0]))
