"""A database written by the previous schema (v14) upgrades in place on
open: its countersignatures and beacons are indexed by CID, and a purge of
an op deletes its countersignature and beacon rows as before. SQLite and
Postgres."""

from __future__ import annotations

import pytest

from stores.base import RelayStore
from stores.moderation import ModerationBatch
from stores.postgres import PostgresStore
from stores.sql.schema import LATEST_VERSION
from stores.sqlite import SqliteStore
from tests.stores.conftest import write_old_database
from tests.stores.test_schema_upgrade_to_v5 import schema_version

V14 = 14
INSERT = (
    "INSERT INTO ops (pos, cid, token, kind, chain_id, author_did, parent_cid, "
    "created_at_ms, state) VALUES (1, ?, 'tok.b', 'beacon', ?, ?, NULL, 5, NULL)"
)
A = "did:dfos:a"


async def test_a_v14_databases_beacon_is_purged_by_its_cid(durable: RelayStore) -> None:
    if not isinstance(durable, SqliteStore | PostgresStore):
        pytest.skip("only durable stores have a schema")
    assert LATEST_VERSION >= 15
    await write_old_database(durable, V14, INSERT, ("b", A, A))
    await durable.open()
    try:
        records = await durable.operations_signed_by(A)
        assert [o.cid for o in records] == ["b"]
        async with durable.moderating() as session:
            await session.apply_moderation(ModerationBatch(A, 7, operations=records))
        assert await durable.operations_signed_by(A) == []
        assert [p.cid for p in await durable.list_purged(A)] == ["b"]
    finally:
        await durable.close()
    assert await schema_version(durable) == LATEST_VERSION
