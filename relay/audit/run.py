"""``audit_store``: one pass over a store's snapshot, every finding named.

Reads the purge records, then every op in log order (positions and the
replay), then the other tables, all inside one ``audit_snapshot`` so the
store may keep ingesting meanwhile (the audit sees the commit it began at).
"""

from __future__ import annotations

import time
from typing import Protocol

from stores.audit import AuditSource

from .findings import AuditReport, Finding
from .log import LogPositions
from .replay import Replay
from .tables import check_tables


class ProgressSink(Protocol):
    total: int | None

    def add(self, n: int) -> None: ...


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def audit_store(
    store: AuditSource, progress: ProgressSink | None = None, now_ms: int | None = None
) -> AuditReport:
    async with store.audit_snapshot() as snap:
        if progress is not None:
            progress.total = await snap.count_operations()
        purged = await snap.purged()
        positions = LogPositions({p.seq for p in purged})
        replay = Replay(_wall_ms() if now_ms is None else now_ms)
        count = 0
        async for op in snap.operations():
            count += 1
            if positions.accept(op.seq, op.cid):
                replay.feed(op)
            if progress is not None:
                progress.add(1)
        tables = [finding async for finding in check_tables(snap, replay)]
    ordered = sorted(positions.findings + replay.findings, key=_by_seq)
    return AuditReport(count, len(replay.heads), len(purged), tuple(ordered + tables))


def _by_seq(finding: Finding) -> int:
    return finding.seq or 0
