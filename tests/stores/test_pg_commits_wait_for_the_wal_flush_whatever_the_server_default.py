"""The Postgres store runs with ``synchronous_commit=on`` unless its URL's
query says otherwise: a server (postgresql.conf, ALTER DATABASE/ROLE ... SET)
whose default is ``off`` must not silently make the relay's answered commits
losable by a crash of the database host. The URL's choice still wins."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from stores.postgres import PostgresStore
from tests.support.backends import selected_backends
from tests.support.scratch_database import scratch_database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected"),
]


async def every_connection_runs_with(store: PostgresStore, n: int) -> set[str]:
    """``synchronous_commit`` as ``n`` pool connections held at once see it."""
    held = asyncio.Event()
    seen: list[str] = []

    async def one() -> None:
        async with store._reading() as conn:
            seen.append(str((await conn.fetch("SHOW synchronous_commit"))[0][0]))
            if len(seen) == n:
                held.set()
            await held.wait()  # all n at once: n distinct connections

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), 30)
    return set(seen)


async def test_a_database_defaulting_to_async_commits_still_gets_synchronous_ones() -> None:
    async with scratch_database(synchronous_commit="off") as url:
        plain = await asyncpg.connect(url)
        try:
            assert await plain.fetchval("SHOW synchronous_commit") == "off"  # the default
        finally:
            await plain.close()
        store = PostgresStore(url, pool_max=3)
        await store.open()
        try:
            assert await every_connection_runs_with(store, 3) == {"on"}
        finally:
            await store.close()


async def test_a_role_defaulting_to_async_commits_still_gets_synchronous_ones() -> None:
    async with scratch_database() as url:
        admin = await asyncpg.connect(url)
        try:
            # this role, in this database only (dropped with it)
            database = await admin.fetchval("SELECT current_database()")
            await admin.execute(
                f'ALTER ROLE CURRENT_USER IN DATABASE "{database}" SET synchronous_commit = off'
            )
        finally:
            await admin.close()
        store = PostgresStore(url, pool_max=2)
        await store.open()
        try:
            assert await every_connection_runs_with(store, 2) == {"on"}
        finally:
            await store.close()


@pytest.mark.parametrize("default", ["on", "off"])
async def test_the_urls_query_still_chooses_async_commits(default: str) -> None:
    async with scratch_database(synchronous_commit=default) as url:
        store = PostgresStore(f"{url}?synchronous_commit=off", pool_max=2)
        await store.open()
        try:
            assert await every_connection_runs_with(store, 2) == {"off"}
        finally:
            await store.close()
