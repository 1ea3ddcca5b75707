"""The store-contract fixture: one opened store per backend (memory, SQLite,
Postgres via ``tests/support/backends``), plus record builders."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from stores.base import (
    ChainRecord,
    CommitBatch,
    OperationKind,
    OperationRecord,
    RelayStore,
)
from stores.memory import MemoryStore
from tests.support.backends import make_store


@pytest.fixture
async def opened(store: RelayStore) -> AsyncIterator[RelayStore]:
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def durable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RelayStore]:
    """A fresh, unopened SQLite or Postgres store (a schema-upgrade test writes
    an old database into it before opening it)."""
    async with make_store(request.param, tmp_path) as store:
        yield store


def is_durable(store: RelayStore) -> bool:
    return not isinstance(store, MemoryStore)


def reopen(store: RelayStore) -> RelayStore:
    """A new, unopened handle on the same storage (memory: the same object)."""
    if isinstance(store, MemoryStore):
        return store
    from stores.postgres import PostgresStore
    from stores.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return SqliteStore(store.path)
    if isinstance(store, PostgresStore):
        return PostgresStore(store.dsn, schema=store.schema)
    raise TypeError(type(store))


def op(
    cid: str,
    kind: OperationKind = "identity-op",
    chain_id: str = "did:dfos:a",
    *,
    parent: str | None = None,
    at: int = 1000,
    state: dict[str, Any] | None = None,
) -> OperationRecord:
    if state is None and kind in ("identity-op", "content-op"):
        state = {"did": chain_id, "deleted": False, "auth": [["k1", "z6Mk1"]], "n": at}
    return OperationRecord(cid, f"tok.{cid}", kind, chain_id, "did:dfos:a", parent, at, state)


def chain(chain_id: str, head: str, at: int = 1000, **state: Any) -> ChainRecord:
    return ChainRecord(chain_id, "identity", "genesis", head, at, {"head": head, **state})


async def commit(store: RelayStore, batch: CommitBatch) -> int:
    async with store.sequencing() as session:
        return await session.commit(batch)


async def append(store: RelayStore, *ops: OperationRecord) -> int:
    return await commit(
        store, CommitBatch(operations=list(ops), resolved_cids={o.cid for o in ops})
    )


async def write_old_database(
    store: RelayStore, version: int, insert: str, row: tuple[str, ...]
) -> None:
    """Create ``store``'s schema as it was at ``version`` (SQLite file or
    Postgres schema), with one row written by ``insert`` (``?`` placeholders)."""
    import sqlite3

    import asyncpg

    from stores.postgres import PostgresStore
    from stores.sql.dialect import POSTGRES, SQLITE
    from stores.sql.schema import VERSION_TABLE, pending_migrations
    from stores.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as db:
            db.execute(VERSION_TABLE)
            for step in pending_migrations(None, SQLITE, "test")[:version]:
                for stmt in step:
                    db.execute(stmt)
            db.execute(insert, row)
        return
    assert isinstance(store, PostgresStore)
    conn = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema or ""})
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{store.schema}"')
        await conn.execute(VERSION_TABLE)
        for step in pending_migrations(None, POSTGRES, "test")[:version]:
            for stmt in step:
                await conn.execute(stmt)
        numbered = insert
        for i in range(len(row)):
            numbered = numbered.replace("?", f"${i + 1}", 1)
        await conn.execute(numbered, *row)
    finally:
        await conn.close()
