"""A database written by the previous schema (v11) upgrades in place on
open: an out-link it holds becomes a share left behind (``updated_ms`` 0),
whose watermark the next process to start carries as its floor, as it took
the out-link's before; in-links stay as they were. SQLite and Postgres."""

from __future__ import annotations

import pytest

from stores.base import FULL_SCOPE, RelayStore
from stores.postgres import PostgresStore
from stores.sql.schema import LATEST_VERSION
from stores.sqlite import SqliteStore
from tests.stores.conftest import write_old_database
from tests.stores.test_schema_upgrade_to_v5 import schema_version

V11 = 11
INSERT = (
    "INSERT INTO peer_links (peer_url, scope_id, direction, state, received_token, "
    "applied_token, pending_tokens, failures, diagnostics, updated_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, '[\"8\"]', 1, '{}', 77)"
)


async def test_a_v11_out_link_becomes_a_share_left_behind(store: RelayStore) -> None:
    if not isinstance(store, SqliteStore | PostgresStore):
        pytest.skip("only durable stores have a schema")
    assert LATEST_VERSION >= 12
    row = ("https://peer.example", FULL_SCOPE, "out", "repairing", "9", "7")
    await write_old_database(store, V11, INSERT, row)
    await store.open()
    try:
        (mark,) = await store.list_out_marks()
        r = mark.record
        assert (r.peer_url, r.scope_id, r.direction, r.state) == row[:4]
        assert (r.received_token, r.applied_token, r.pending_tokens) == ("9", "7", ("8",))
        assert (r.failures, r.updated_ms) == (1, 0)
        (link,) = await store.list_links()
        assert (link.direction, link.applied_token, link.updated_ms) == ("out", "7", 77)
    finally:
        await store.close()
    assert await schema_version(store) == LATEST_VERSION
