"""Store backends for the test suite: one factory per backend name.

The relay suite and the store-contract suite run over every backend named in
``DFOS_TEST_STORES`` (default: all of them).

- ``memory``   a fresh ``MemoryStore``
- ``sqlite``   a ``SqliteStore`` on a file in the test's ``tmp_path``
- ``postgres`` a ``PostgresStore`` in a fresh schema of the real server
               (``DFOS_TEST_PG_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``),
               dropped afterwards, off the test's path (``tests.support.schema_dropper``;
               ``wait_for_schema_drops`` at the session's end)
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from stores.base import RelayStore
from stores.memory import MemoryStore

if TYPE_CHECKING:
    from tests.support.schema_dropper import SchemaDropper

ALL_BACKENDS = ("memory", "sqlite", "postgres")
PG_URL = os.environ.get("DFOS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def selected_backends() -> list[str]:
    raw = os.environ.get("DFOS_TEST_STORES", ",".join(ALL_BACKENDS))
    return [name.strip() for name in raw.split(",") if name.strip()]


def new_pg_schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


async def drop_pg_schema(schema: str) -> None:
    import asyncpg

    from stores.postgres import quoted_schema

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {quoted_schema(schema)} CASCADE")
    finally:
        await conn.close()


_dropper: SchemaDropper | None = None


def _schema_dropper() -> SchemaDropper:
    global _dropper
    if _dropper is None:
        from tests.support.schema_dropper import SchemaDropper

        _dropper = SchemaDropper(PG_URL)
    return _dropper


def wait_for_schema_drops(timeout_s: float = 120.0) -> set[str]:
    """Block until every schema ``pg_schema`` gave is dropped; the ones left."""
    return set() if _dropper is None else _dropper.wait(timeout_s)


@asynccontextmanager
async def pg_schema() -> AsyncIterator[str]:
    """A fresh schema name on the test server, dropped after exit (queued:
    the next test does not wait for it)."""
    schema = new_pg_schema()
    try:
        yield schema
    finally:
        _schema_dropper().drop_later(schema)


@asynccontextmanager
async def make_store(name: str, tmp_path: Path) -> AsyncIterator[RelayStore]:
    """A fresh, empty, *unopened* store of the named backend (cleaned up after).

    Whoever opens it closes it; a store left open is closed here.
    """
    if name == "memory":
        yield MemoryStore()
        return
    if name == "sqlite":
        from stores.sqlite import SqliteStore

        sqlite_store = SqliteStore(tmp_path / f"relay-{uuid.uuid4().hex[:8]}.db")
        try:
            yield sqlite_store
        finally:
            await sqlite_store.close()
        return
    if name == "postgres":
        from stores.postgres import PostgresStore

        async with pg_schema() as schema:
            pg_store = PostgresStore(PG_URL, schema=schema, pool_max=4)
            try:
                yield pg_store
            finally:
                await pg_store.close()
        return
    raise ValueError(f"unknown store backend {name!r}")
