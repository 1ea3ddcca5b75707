"""Bad or foreign data gives a clear StoreError from ``open()``, naming the
problem: newer schema, corrupt or read-only SQLite, unreachable Postgres,
unsupported URLs. Nothing is half-started and nothing is dropped."""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from stores.base import StoreError
from stores.factory import open_store_from_url
from stores.memory import MemoryStore
from stores.postgres import PostgresStore
from stores.sql.schema import LATEST_VERSION
from stores.sqlite import SqliteStore
from tests.support.backends import PG_URL, pg_schema, selected_backends

needs_pg = pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected")


@pytest.fixture
def restore_modes() -> Iterator[list[Path]]:
    paths: list[Path] = []
    yield paths
    for p in paths:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


async def test_sqlite_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_version VALUES (?)", (LATEST_VERSION + 7,))
    with pytest.raises(StoreError, match=rf"schema version {LATEST_VERSION + 7}.*newer"):
        await SqliteStore(path).open()
    with sqlite3.connect(path) as db:  # nothing dropped
        assert db.execute("SELECT COUNT(*) FROM ops").fetchone() == (0,)


async def test_sqlite_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    path.write_bytes(b"this is not an sqlite database at all" * 200)
    with pytest.raises(StoreError, match=r"relay\.db.*not a database"):
        await SqliteStore(path).open()


async def test_sqlite_read_only_file(tmp_path: Path, restore_modes: list[Path]) -> None:
    path = tmp_path / "relay.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    path.chmod(0o444)
    restore_modes.append(path)
    with pytest.raises(StoreError, match=r"relay\.db is read-only"):
        await SqliteStore(path).open()


async def test_sqlite_read_only_directory(tmp_path: Path, restore_modes: list[Path]) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o555)
    restore_modes.append(directory)
    with pytest.raises(StoreError, match=r"directory .*ro is read-only"):
        await SqliteStore(directory / "relay.db").open()
    assert not (directory / "relay.db").exists()


async def test_sqlite_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"directory .*missing does not exist"):
        await SqliteStore(tmp_path / "missing" / "relay.db").open()


@needs_pg
async def test_postgres_unreachable_names_host_and_port() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test")
    with pytest.raises(StoreError, match=r"cannot reach Postgres at 127\.0\.0\.1:1"):
        await store.open()


@needs_pg
async def test_postgres_newer_schema_is_refused() -> None:
    async with pg_schema() as schema:
        store = PostgresStore(PG_URL, schema=schema)
        await store.open()
        await store.close()
        conn = await asyncpg.connect(PG_URL)
        try:
            await conn.execute(
                f'INSERT INTO "{schema}".schema_version VALUES ($1)', LATEST_VERSION + 1
            )
        finally:
            await conn.close()
        with pytest.raises(StoreError, match=rf"schema {schema}.*version {LATEST_VERSION + 1}"):
            await PostgresStore(PG_URL, schema=schema).open()


def test_factory_picks_backends(tmp_path: Path) -> None:
    assert isinstance(open_store_from_url("memory://"), MemoryStore)
    sqlite_store = open_store_from_url(f"sqlite:///{tmp_path}/relay.db")
    assert isinstance(sqlite_store, SqliteStore)
    assert sqlite_store.path == tmp_path / "relay.db"
    relative = open_store_from_url("sqlite:///relay.db")
    assert isinstance(relative, SqliteStore) and relative.path == Path("relay.db")
    pg = open_store_from_url("postgresql://postgres@127.0.0.1:5432/test?schema=abc")
    assert isinstance(pg, PostgresStore)
    assert pg.schema == "abc" and pg.dsn == "postgresql://postgres@127.0.0.1:5432/test"


@pytest.mark.parametrize("url", ["mysql://x/y", "relay.db", "sqlite://", "sqlite:///"])
def test_factory_rejects_unknown_urls(url: str) -> None:
    with pytest.raises(StoreError, match="URL"):
        open_store_from_url(url)
