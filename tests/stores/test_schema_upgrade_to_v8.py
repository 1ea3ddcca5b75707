"""A database written by the previous schema (v7) upgrades in place on open,
and the log's head then counts the positions a purge left behind: a purge
that removed the tail of the log before the upgrade does not hand its
positions out again after it. SQLite and Postgres."""

from __future__ import annotations

from stores.base import CommitBatch, RelayStore
from stores.sql.schema import LATEST_VERSION
from tests.stores.conftest import commit, op, write_old_database

V7 = 7
PURGED_AT_3 = (
    "INSERT INTO purged_ops (pos, cid, kind, chain_id, author_did, purged_did, purged_at_ms) "
    "VALUES (3, ?, 'artifact', ?, ?, ?, 1)"
)


async def test_a_v7_database_keeps_its_purged_positions(durable: RelayStore) -> None:
    assert LATEST_VERSION >= 8
    a = "did:dfos:a"
    await write_old_database(durable, V7, PURGED_AT_3, ("gone", a, a, a))
    await durable.open()
    try:
        assert await durable.log_length() == 3
        assert await commit(durable, CommitBatch(operations=[op("next")])) == 4
        assert (await durable.read_seq_range(0, 10, 10))[0].seq == 4
    finally:
        await durable.close()
