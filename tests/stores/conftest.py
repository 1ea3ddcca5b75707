"""The store-contract fixture: one opened store per backend (memory, SQLite,
Postgres via ``tests/support/backends``), plus record builders."""

from __future__ import annotations

from collections.abc import AsyncIterator
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


@pytest.fixture
async def opened(store: RelayStore) -> AsyncIterator[RelayStore]:
    await store.open()
    try:
        yield store
    finally:
        await store.close()


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
