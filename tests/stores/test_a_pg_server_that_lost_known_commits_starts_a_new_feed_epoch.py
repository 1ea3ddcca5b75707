"""A failover to a standby that had not received the relay's last commits
loses them even with ``synchronous_commit=on`` on the old primary, and their
seqs are given again: a Postgres store that reaches a new server whose log
ends below a seq it knew committed starts a new feed epoch (followers get
410, never a silent resume), once for the loss, whichever process finds it;
a new server that kept every commit keeps the epoch.

The shared server cannot be replaced here. A new server is made as its
effect, in a scratch database: the last log rows gone (deleted, or the tables
copied back as of an earlier commit), another start (the database's search
path puts ``public`` before ``pg_catalog``, where a ``pg_postmaster_start_time()``
of its own answers the start a test sets), and every connection ended."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx
import pytest

from relay import create_relay
from relay.config import RelayConfig
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import StoreError
from stores.postgres import PostgresStore
from tests.stores.conftest import append, op
from tests.stores.test_a_pg_server_restart_after_async_commits_starts_a_new_feed_epoch import (
    database,
    feed_head,
    follower_past_lost_commits,
    once_reconnected,
    restore,
)
from tests.support.backends import selected_backends
from tests.support.relay_api import PAST_MS
from tests.support.scratch_database import end_connections, scratch_database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected"),
]

LOST = "commits were lost"
# the server's start as a test sets it (the real one until it does)
START_OF_OUR_OWN = (
    "CREATE TABLE server_started (at TIMESTAMPTZ NOT NULL)",
    "CREATE FUNCTION public.pg_postmaster_start_time() RETURNS TIMESTAMPTZ "
    "LANGUAGE sql AS 'SELECT COALESCE(MAX(at), pg_catalog.pg_postmaster_start_time()) "
    "FROM public.server_started'",
)


@asynccontextmanager
async def scratch_server() -> AsyncIterator[str]:
    """A scratch database whose server start ``new_server`` changes."""
    async with scratch_database(search_path="public, pg_catalog") as db:
        async with database(db) as conn:
            for stmt in START_OF_OUR_OWN:
                await conn.execute(stmt)
        yield db


async def opened(url: str, name: str = "relay") -> PostgresStore:
    """An open store whose connections are named ``name`` (a process)."""
    store = PostgresStore(f"{url}?application_name={name}")
    await store.open()
    return store


async def end_connections_of(url: str, name: str) -> None:
    """End the connections of the store named ``name`` only (the others go on
    with theirs, as if they had not been used since the server changed:
    otherwise their pools reconnect at once, to keep their minimum size)."""
    async with database(url) as conn:
        ended = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = $1",
            name,
        )
    assert ended > 0


async def commit_ops(store: PostgresStore, prefix: str, n: int) -> int:
    """Commit ``n`` ops (one chain each); the log's head after them."""
    head = 0
    for i in range(n):
        head = await append(store, op(f"{prefix}{i}", chain_id=f"did:dfos:{prefix}{i}"))
    return head


async def new_server(url: str, kept: int | None = None, ending: bool = True) -> None:
    """The store's server replaced by one, started now, whose log ends at
    ``kept`` (None: as it is); every connection to the old one ended, unless
    not ``ending`` (a test ends them itself)."""
    async with database(url) as conn:
        if kept is not None:
            await conn.execute("DELETE FROM ops WHERE pos > $1", kept)
        await conn.execute("INSERT INTO server_started VALUES (clock_timestamp())")
        assert await conn.fetchval("SELECT async_commits FROM server_start") is False
    if ending:
        assert await end_connections(url) > 0


async def epoch_reconnected(store: PostgresStore) -> str:
    """The store's epoch, read once its pool reconnected (a check first)."""
    for _ in range(50):
        try:
            return await store.get_feed_epoch()
        # a connection the server ended, not yet replaced (its first use
        # fails, as after any server restart: how depends on asyncpg's state)
        except (StoreError, asyncpg.InternalClientError):
            await asyncio.sleep(0.05)
    return await store.get_feed_epoch()


def losses(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if LOST in r.getMessage()]


async def test_a_running_relay_whose_new_server_lost_its_commits_starts_a_new_epoch() -> None:
    first, lost = (mixed_workload(12, seed=s, now_ms=PAST_MS) for s in (91, 92))
    async with scratch_server() as db:
        relay = create_relay(PostgresStore(db), config=RelayConfig(feed_heartbeat_s=1.0))
        async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(timeout=30) as http:
            epoch, kept_head, read_to, follower = await follower_past_lost_commits(
                db, http, url, first, lost
            )
            await restore(db)  # the standby had every commit up to kept_head only
            await new_server(db)

            new_epoch, head = await once_reconnected(lambda: feed_head(http, url))
            assert head == kept_head < read_to and new_epoch != epoch
            sent, told = await asyncio.wait_for(follower, 20)
            assert sent == [] and told["status"] == 410 and told["epoch"] == new_epoch
            gone = await http.get(f"{url}/changes", params={"since": f"{epoch}.{read_to}"})
            assert gone.status_code == 410 and gone.json()["epoch"] == new_epoch


async def test_a_store_whose_commits_are_gone_starts_a_new_epoch_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dfos_relay")
    async with scratch_server() as db:
        store = await opened(db)
        try:
            epoch = await store.get_feed_epoch()
            assert await commit_ops(store, "a", 6) == 6
            await new_server(db, kept=3)
            renewed = await epoch_reconnected(store)
            assert renewed != epoch
            [warning] = losses(caplog)
            assert "seq 3" in warning and "seq 6" in warning
            # seqs 4, 5 are given again: under the new epoch, no loss
            assert await commit_ops(store, "b", 2) == 5
            await new_server(db)  # a server that kept every commit
            assert await epoch_reconnected(store) == renewed
            assert len(losses(caplog)) == 1
        finally:
            await store.close()


async def test_stores_finding_one_loss_together_start_one_epoch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dfos_relay")
    async with scratch_server() as db:
        stores = [await opened(db) for _ in range(3)]  # three processes
        try:
            epoch = await stores[0].get_feed_epoch()
            for i, store in enumerate(stores):
                await commit_ops(store, f"s{i}-", 2)  # each knows its own seqs
            await new_server(db, kept=1)
            found = await asyncio.wait_for(
                asyncio.gather(*(epoch_reconnected(s) for s in stores)), 30
            )
            assert len(set(found)) == 1 and found[0] != epoch
            assert len(losses(caplog)) == 1
        finally:
            for store in stores:
                await store.close()


@asynccontextmanager
async def first_and_later(
    first_reads_the_head: bool,
) -> AsyncIterator[tuple[str, PostgresStore, PostgresStore, str]]:
    """Two processes: ``first`` committed seqs 1-2, ``later`` 3-6 (and
    ``first`` read the head 6 if asked); then a new server that kept 2,
    whose connections stay up until a test ends them. Yields (db, first,
    later, the epoch before)."""
    async with scratch_server() as db:
        first, later = await opened(db, "first"), await opened(db, "later")
        try:
            epoch = await first.get_feed_epoch()
            await commit_ops(first, "a", 2)
            assert await commit_ops(later, "b", 4) == 6
            if first_reads_the_head:
                assert await first.log_length() == 6  # a head read: it knows seq 6 too
            await new_server(db, kept=2, ending=False)
            yield db, first, later, epoch
        finally:
            await first.close()
            await later.close()


async def test_a_store_reaching_the_server_after_another_renewed_the_epoch_keeps_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dfos_relay")
    async with first_and_later(first_reads_the_head=True) as (db, first, later, epoch):
        await end_connections_of(db, "first")
        renewed = await epoch_reconnected(first)
        assert renewed != epoch and len(losses(caplog)) == 1
        assert await commit_ops(first, "c", 6) == 8  # past seq 6 on the new server
        # the other process knew seq 6 too: the same loss, already told
        await end_connections_of(db, "later")
        assert await epoch_reconnected(later) == renewed
        assert len(losses(caplog)) == 1


async def test_a_store_that_knew_lost_commits_tells_them_after_another_committed_past(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dfos_relay")
    async with first_and_later(first_reads_the_head=False) as (db, first, later, epoch):
        await end_connections_of(db, "first")
        assert await epoch_reconnected(first) == epoch  # it knew seq 2 only
        assert await commit_ops(first, "c", 6) == 8  # seqs 3 to 6 given again
        # the other knew seq 6, past the head the new server started at:
        # lost, though the head is past it by now (told late, but told)
        await end_connections_of(db, "later")
        renewed = await epoch_reconnected(later)
        assert renewed != epoch and len(losses(caplog)) == 1
        assert await epoch_reconnected(first) == renewed


async def test_a_start_recorded_by_a_v10_relay_is_checked_against_the_head_as_read() -> None:
    # a relay of schema v10 still running (a rolling upgrade) records a new
    # start, leaving what v11 noted of the one before: not taken for this one
    async with scratch_server() as db:
        store = await opened(db, "v11")
        try:
            epoch = await store.get_feed_epoch()
            assert await commit_ops(store, "a", 6) == 6
            await new_server(db, kept=2, ending=False)
            async with database(db) as conn:  # noted for the start before: renewed
                await conn.execute(
                    "UPDATE server_start SET renewed = true, first_head = 6, "
                    "started = public.pg_postmaster_start_time()"  # a v10 relay's record
                )
            await end_connections_of(db, "v11")
            assert await epoch_reconnected(store) != epoch
        finally:
            await store.close()
