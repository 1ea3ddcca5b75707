"""A database written by the previous schema (v8) upgrades in place on open
and gains the index of ops by parent (``ops_children``): the tips and
branches of chains written before the upgrade read as those written after.
SQLite and Postgres."""

from __future__ import annotations

from stores.base import RelayStore
from stores.sql.schema import LATEST_VERSION
from tests.stores.conftest import append, op, write_old_database

V8 = 8
GENESIS_AT_1 = (
    "INSERT INTO ops (pos, cid, token, kind, chain_id, author_did, parent_cid, created_at_ms, "
    "state) VALUES (1, ?, 'tok.g', 'identity-op', ?, ?, NULL, 1, ?)"
)


async def test_a_v8_database_reads_tips_and_branches(durable: RelayStore) -> None:
    assert LATEST_VERSION >= 9
    a = "did:dfos:a"
    await write_old_database(durable, V8, GENESIS_AT_1, ("g", a, a, '{"n": 1}'))
    await durable.open()
    try:
        await append(durable, op("u", parent="g", at=2), op("f", parent="g", at=3))
        assert [e.cid for e in await durable.read_chain_tips(a, "identity-op", 10)] == [
            "u",
            "f",
        ]
        page = await durable.read_branch(a, "identity-op", "f", 10, None, 10)
        assert page is not None and [e.cid for e in page.entries] == ["g", "f"]
    finally:
        await durable.close()
