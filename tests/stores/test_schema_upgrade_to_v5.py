"""A database written by the previous schema (v4) upgrades in place on open:
its log and peer cursors stay, and the replication ledger starts empty and
works. SQLite and Postgres."""

from __future__ import annotations

import sqlite3

import asyncpg
import pytest

from stores.base import FULL_SCOPE, LinkRecord, RelayStore
from stores.postgres import PostgresStore
from stores.sql.schema import LATEST_VERSION, READ_VERSION
from stores.sqlite import SqliteStore
from tests.stores.conftest import write_old_database

V4 = 4
CURSOR = ("https://peer.example", "bafycursor")


async def write_v4_database(store: RelayStore) -> None:
    await write_old_database(
        store, V4, "INSERT INTO peer_cursors (peer_url, cursor) VALUES (?, ?)", CURSOR
    )


async def schema_version(store: RelayStore) -> int:
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as db:
            return int(db.execute(READ_VERSION).fetchone()[0])
    assert isinstance(store, PostgresStore)
    conn = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema or ""})
    try:
        return int(await conn.fetchval(READ_VERSION))
    finally:
        await conn.close()


async def test_a_v4_database_gains_the_ledger(store: RelayStore) -> None:
    if not isinstance(store, SqliteStore | PostgresStore):
        pytest.skip("only durable stores have a schema")
    assert LATEST_VERSION >= 5
    await write_v4_database(store)
    await store.open()
    try:
        assert await store.list_peer_cursors() == dict([CURSOR])
        assert await store.list_links() == []
        link = LinkRecord(CURSOR[0], FULL_SCOPE, "in", state="live", updated_ms=5)
        await store.put_link(link)
        assert await store.list_links() == [link]
    finally:
        await store.close()
    assert await schema_version(store) == LATEST_VERSION
