"""A database written by the previous schema (v13) upgrades in place on
open: the bans it held are read as changes from the first mark, and a ban
written afterwards by plain SQL, as a v13 relay still running writes it
(it knows nothing of change marks), is read as a change too. SQLite and
Postgres."""

from __future__ import annotations

import sqlite3

import asyncpg
import pytest

from stores.base import RelayStore
from stores.moderation import BanRecord
from stores.postgres import PostgresStore
from stores.sql.dialect import POSTGRES
from stores.sql.schema import LATEST_VERSION
from stores.sqlite import SqliteStore
from tests.stores.conftest import write_old_database
from tests.stores.test_schema_upgrade_to_v5 import schema_version

V13 = 13
INSERT = "INSERT INTO bans (did, reason, banned_at_ms, banned_by) VALUES (?, ?, 5, ?)"
OLD = BanRecord("did:dfos:old", "spam", 5, "did:dfos:op")
LATE = ("did:dfos:late", "abuse", "did:dfos:op")


async def write_as_v13(store: RelayStore) -> None:
    """A ban written as a v13 relay writes it: the bans row alone."""
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as db:
            db.execute(INSERT, LATE)
        return
    assert isinstance(store, PostgresStore)
    conn = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema or ""})
    try:
        await conn.execute(POSTGRES.render(INSERT), *LATE)
    finally:
        await conn.close()


async def test_a_v13_databases_bans_are_read_as_changes(store: RelayStore) -> None:
    if not isinstance(store, SqliteStore | PostgresStore):
        pytest.skip("only durable stores have a schema")
    assert LATEST_VERSION >= 14
    await write_old_database(store, V13, INSERT, (OLD.did, OLD.reason, OLD.banned_by))
    await store.open()
    try:
        first = await store.ban_changes(0)
        assert first.whole and first.banned == [OLD] and first.lifted == []
        assert (await store.ban_changes(first.mark)).banned == []
        await write_as_v13(store)
        late = await store.ban_changes(first.mark)
        assert late.banned == [BanRecord(LATE[0], LATE[1], 5, LATE[2])]
        await store.delete_ban(OLD.did)
        assert (await store.ban_changes(late.mark)).lifted == [OLD.did]
    finally:
        await store.close()
    assert await schema_version(store) == LATEST_VERSION
