"""A database written by the previous schema (v2) upgrades in place on open:
ops waiting in its buffer keep waiting, with an unknown ``since`` (counted
as such, never as old) until they are parked again; rejection notes start
empty and work. SQLite and Postgres."""

from __future__ import annotations

import pytest

from stores.base import CommitBatch, PendingOp, RejectionNote, RelayStore
from stores.postgres import PostgresStore
from stores.sql.schema import LATEST_VERSION
from stores.sqlite import SqliteStore
from tests.stores.conftest import commit, write_old_database

V2_WAITING = ("w", "tok.w", "op:p")


async def write_v2_database(store: RelayStore) -> None:
    await write_old_database(
        store, 2, "INSERT INTO raw_ops (cid, token, waits_for) VALUES (?, ?, ?)", V2_WAITING
    )


async def test_a_v2_database_upgrades_in_place(store: RelayStore) -> None:
    if not isinstance(store, SqliteStore | PostgresStore):
        pytest.skip("only durable stores have a schema")
    assert LATEST_VERSION >= 3  # v2 -> v3 (and on to the latest)
    await write_v2_database(store)
    await store.open()
    try:
        assert await store.find_buffered(["w"]) == {"w": PendingOp(*V2_WAITING)}
        summary = await store.pending_summary([0])
        assert (summary.waiting["op"], summary.older["op"], summary.oldest) == (1, [0], None)
        # parked again (as the restart's drain does): it waits since then
        await commit(store, CommitBatch(waiting={"w": PendingOp(*V2_WAITING, since_ms=500)}))
        assert (await store.find_buffered(["w"]))["w"].since_ms == 500
        note = RejectionNote("c", "chain-rule", "no", 1, "h")
        await store.record_rejection_notes([note], keep=5)
        assert await store.get_rejection_notes(["c"]) == {"c": note}
    finally:
        await store.close()
