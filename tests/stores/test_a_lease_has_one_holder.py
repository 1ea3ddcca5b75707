"""Store contract: a named lease has at most one holder among every handle on
the same storage (processes, on a durable store); its holder keeps it until
it releases it, closes its store, dies or is cut off, and then another may
take it. Leases of other names, and of other Postgres schemas, are apart."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from stores.base import RelayStore
from stores.postgres import PostgresStore
from stores.postgres_lease import LEASE_CLASS, AdvisoryLease
from stores.sqlite import SqliteStore
from stores.sqlite_lease import lease_path
from tests.stores.conftest import reopen
from tests.support.backends import make_store


@asynccontextmanager
async def opened_backend(name: str, tmp_path: Path) -> AsyncIterator[RelayStore]:
    async with make_store(name, tmp_path) as store:
        await store.open()
        yield store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def opened_durable(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[RelayStore]:
    async with opened_backend(request.param, tmp_path) as store:
        yield store


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with opened_backend("sqlite", tmp_path) as store:
        assert isinstance(store, SqliteStore)
        yield store


@pytest.fixture
async def pg_store(tmp_path: Path) -> AsyncIterator[PostgresStore]:
    async with opened_backend("postgres", tmp_path) as store:
        assert isinstance(store, PostgresStore)
        yield store


@pytest.fixture
async def other(opened: RelayStore) -> AsyncIterator[RelayStore]:
    """A second handle on the same storage (memory: the same store)."""
    handle = reopen(opened)
    if handle is opened:
        yield handle
        return
    await handle.open()
    try:
        yield handle
    finally:
        await handle.close()


async def test_the_first_to_ask_holds_it_and_keeps_it(
    opened: RelayStore, other: RelayStore
) -> None:
    first, second = await opened.lease("pull"), await other.lease("pull")
    assert await first.held()
    assert not await second.held()
    assert await first.held()  # asked again: still the holder
    assert not await second.held()


async def test_a_released_lease_passes_to_the_next_that_asks(
    opened: RelayStore, other: RelayStore
) -> None:
    first, second = await opened.lease("pull"), await other.lease("pull")
    assert await first.held()
    await first.release()
    assert await second.held()
    assert not await first.held()


async def test_leases_of_other_names_are_apart(opened: RelayStore, other: RelayStore) -> None:
    assert await (await opened.lease("pull")).held()
    assert await (await other.lease("audit")).held()


async def test_closing_the_holders_store_frees_it(opened_durable: RelayStore) -> None:
    holder = reopen(opened_durable)
    await holder.open()
    assert await (await holder.lease("pull")).held()
    waiting = await opened_durable.lease("pull")
    assert not await waiting.held()
    await holder.close()
    assert await waiting.held()


async def test_a_lease_name_is_a_short_lowercase_word(opened: RelayStore) -> None:
    for bad in ("", "Pull", "pull lease", "../pull", "x" * 40):
        with pytest.raises(ValueError):
            await opened.lease(bad)


async def test_a_killed_holder_process_frees_a_sqlite_lease(sqlite_store: SqliteStore) -> None:
    opened = sqlite_store
    script = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    path = lease_path(opened.path, "pull")
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lease = await opened.lease("pull")
        assert not await lease.held()
        holder.kill()  # no release: the kernel drops the lock with the process
        holder.wait()
        assert await lease.held()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.postgres
async def test_a_postgres_holder_cut_off_loses_it(pg_store: PostgresStore) -> None:
    opened, other = pg_store, reopen(pg_store)
    await other.open()
    try:
        await _cut_off(opened, other)
    finally:
        await other.close()


async def _cut_off(opened: PostgresStore, other: RelayStore) -> None:
    first, second = await opened.lease("pull"), await other.lease("pull")
    assert await first.held()
    assert not await second.held()
    admin = await asyncpg.connect(opened.dsn)
    try:  # the server ends the holder's session, as when its host goes away
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
            "WHERE locktype = 'advisory' AND classid = $1 AND objid = hashtext($2)::oid "
            "AND objsubid = 2 AND granted",
            LEASE_CLASS,
            f"{opened.schema}:pull",
        )
    finally:
        await admin.close()
    assert killed == 1
    for _ in range(50):  # the server drops the lock as the session ends
        if await second.held():
            break
        await asyncio.sleep(0.1)
    assert await second.held()
    assert not await first.held()  # its session is gone: it knows it lost the lease


@pytest.mark.postgres
async def test_postgres_leases_of_other_schemas_are_apart(pg_store: PostgresStore) -> None:
    opened = pg_store
    assert await (await opened.lease("pull")).held()
    elsewhere = AdvisoryLease(opened.dsn, f"{opened.schema}_other", "pull")
    try:
        assert await elsewhere.held()
    finally:
        await elsewhere.release()
