"""A database written by the previous schema (v12) upgrades in place on
open: it gains the record of purges under way (none), and the bans and
purge records it held stay. SQLite and Postgres."""

from __future__ import annotations

import pytest

from stores.base import RelayStore
from stores.postgres import PostgresStore
from stores.sql.schema import LATEST_VERSION
from stores.sqlite import SqliteStore
from tests.stores.conftest import write_old_database
from tests.stores.test_schema_upgrade_to_v5 import schema_version

V12 = 12
INSERT = "INSERT INTO bans (did, reason, banned_at_ms, banned_by) VALUES (?, ?, 5, ?)"


async def test_a_v12_database_has_no_purge_under_way(store: RelayStore) -> None:
    if not isinstance(store, SqliteStore | PostgresStore):
        pytest.skip("only durable stores have a schema")
    assert LATEST_VERSION >= 13
    await write_old_database(store, V12, INSERT, ("did:dfos:spam", "spam", "did:dfos:op"))
    await store.open()
    try:
        assert await store.purges_under_way() == {}
        assert [b.did for b in await store.list_bans()] == ["did:dfos:spam"]
    finally:
        await store.close()
    assert await schema_version(store) == LATEST_VERSION
