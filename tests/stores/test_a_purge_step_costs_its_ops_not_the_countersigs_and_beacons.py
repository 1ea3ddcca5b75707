"""A purge step deletes the countersignatures and beacons of its ops through
indexes on their CIDs (schema v15): a step that removes one op costs the
same however many countersignatures and beacons other ops left (a scan of
both tables per step made a purge in N steps read them N times). Counted in
SQLite VM instructions."""

from __future__ import annotations

from pathlib import Path

from stores.base import BeaconRecord, CommitBatch, CountersignatureRecord
from stores.moderation import ModerationBatch
from stores.sqlite import SqliteStore
from tests.stores.conftest import append, commit, op
from tests.stores.test_sqlite_chain_reads_use_the_chain_indexes import STEP

OTHERS = 3000  # countersignatures and beacons of other ops
A = "did:dfos:a"


async def step_ticks(store: SqliteStore, batch: ModerationBatch) -> int:
    """SQLite VM work (ticks of ``STEP`` instructions) of one moderation write."""
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 0

    writer = store._live_writer()
    await writer.hop(lambda db: db.set_progress_handler(tick, STEP))
    try:
        async with store.moderating() as session:
            await session.apply_moderation(batch)
    finally:
        await writer.hop(lambda db: db.set_progress_handler(None, STEP))
    return ticks[0]


async def test_a_step_does_not_scan_other_countersignatures_and_beacons(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "relay.db")
    await store.open()
    try:
        await append(store, op("g"), op("u", parent="g", at=2))
        others = CommitBatch(
            beacons={
                f"did:dfos:b{i}": BeaconRecord(f"did:dfos:b{i}", f"b{i}", f"tok.b{i}", 1)
                for i in range(OTHERS)
            },
            countersignatures=[
                CountersignatureRecord(f"t{i}", "did:dfos:w", f"c{i}", f"tok.c{i}")
                for i in range(OTHERS)
            ],
        )
        await commit(store, others)
        records = {o.cid: o for o in await store.operations_signed_by(A)}
        ticks = await step_ticks(store, ModerationBatch(A, 7, operations=[records["u"]]))
        # a scan passes each row for at least a few instructions
        assert ticks < OTHERS // STEP, ticks
        assert [o.cid for o in await store.operations_signed_by(A)] == ["g"]
    finally:
        await store.close()
