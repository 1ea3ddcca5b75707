"""A database written by the previous schema (v6) upgrades in place on open:
its buffered ops stay and keep their count, and copies kept beside them
(v7) count as pending and go with their CID's op. SQLite and Postgres."""

from __future__ import annotations

from stores.base import CommitBatch, PendingOp, RelayStore
from stores.sql.schema import LATEST_VERSION
from tests.stores.conftest import commit, write_old_database

V6 = 6


async def _pending(store: RelayStore) -> int:
    async with store.sequencing() as session:
        return await session.count_pending()


async def test_a_v6_database_keeps_its_buffer_and_gains_copies(
    durable: RelayStore,
) -> None:
    assert LATEST_VERSION >= 7
    await write_old_database(
        durable,
        V6,
        "INSERT INTO raw_ops (cid, token, waits_for, taken) VALUES (?, ?, ?, 0)",
        ("w", "tok.w", "op:p"),
    )
    await durable.open()
    try:
        assert await durable.get_unsequenced(10) == [PendingOp("w", "tok.w", "op:p")]
        assert await _pending(durable) == 1
        await commit(durable, CommitBatch(copies={("w", "h1"): PendingOp("w", "tok.1", "", 5)}))
        assert await _pending(durable) == 2
        await commit(durable, CommitBatch(resolved_cids={"w"}))
        assert await _pending(durable) == 0
        async with durable.sequencing() as session:
            assert await session.take_copies(["w"]) == []
    finally:
        await durable.close()
