"""With ``synchronous_commit=off`` in its URL, a Postgres store's answered
commits may be lost by a crash of the database server, and their seqs given
again to other ops. A feed follower holding a token past the surviving head
must get an explicit gap (410, a new epoch), never a silent resume: a store
that reaches a restarted server after asynchronous commits starts a new
epoch, at open and under a running relay (its new connections check). With
synchronous commits a restart keeps the epoch.

The shared server cannot be restarted here. A restart is made as its effect:
the database as of an earlier commit (every table copied while the relay
runs, then copied back), the recorded server start made older (what a new
start changes), and every connection of the relay ended (what the server's
going down does to them), in a scratch database of its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest
from httpx_sse import aconnect_sse

from relay import create_relay
from relay.config import RelayConfig
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.postgres import PostgresStore, quoted_schema
from tests.support.backends import PG_URL, pg_schema, selected_backends
from tests.support.relay_api import PAST_MS
from tests.support.scratch_database import end_connections, scratch_database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected"),
]

ASYNC = "?synchronous_commit=off"
T = TypeVar("T")


async def feed_head(http: httpx.AsyncClient, url: str) -> tuple[str, int]:
    answer = await http.get(f"{url}/.well-known/dfos-relay")
    assert answer.status_code == 200, answer.text
    feed = answer.json()["changesFeed"]
    return str(feed["epoch"]), int(feed["headSeq"])


async def post(http: httpx.AsyncClient, url: str, ops: list[str]) -> None:
    answer = await http.post(f"{url}/operations", json={"operations": ops})
    assert answer.status_code == 200, answer.text
    assert {r["status"] for r in answer.json()["results"]} == {"new"}


async def once_reconnected(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt``'s result, retried while the relay's pool still hands out a
    connection the server ended before the relay noticed (the first use of
    each such one fails, as after any server restart)."""
    for _ in range(20):
        try:
            return await attempt()
        except AssertionError:
            await asyncio.sleep(0.1)
    return await attempt()


@asynccontextmanager
async def database(url: str, schema: str = "public") -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"SET search_path = {quoted_schema(schema)}")
        yield conn
    finally:
        await conn.close()


async def tables(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
    )
    return [str(r[0]) for r in rows]


async def snapshot(url: str) -> None:
    """Every table as of the last commit (what the server holds if the later
    commits never reach its disk)."""
    async with database(url) as conn, conn.transaction(isolation="repeatable_read"):
        await conn.execute("CREATE SCHEMA on_disk")
        for table in await tables(conn):
            await conn.execute(f"CREATE TABLE on_disk.{table} AS TABLE public.{table}")


async def restore(url: str) -> None:
    async with database(url) as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")  # no triggers
        names = await tables(conn)
        await conn.execute(f"TRUNCATE {', '.join(names)}")
        for table in names:
            await conn.execute(f"INSERT INTO public.{table} TABLE on_disk.{table}")


async def restart(url: str, schema: str = "public") -> dict[str, Any]:
    """Make the server's start differ from the one the store recorded; the
    record as it was."""
    async with database(url, schema) as conn:
        row = await conn.fetchrow("SELECT started, async_commits FROM server_start")
        assert row is not None and row["started"] is not None
        await conn.execute("UPDATE server_start SET started = started - interval '1 hour'")
        return dict(row)


async def live_tail(
    url: str, since: str, ready: asyncio.Event, until: int | None = None
) -> tuple[list[int], dict[str, Any] | None]:
    """The seqs a live tail from ``since`` (up to ``until``) sends, and the
    error event that ended it (None: it ended at ``until``)."""
    params = {"since": since, "live": "true"}
    if until is not None:
        params["until_seq"] = str(until)
    seqs: list[int] = []
    async with (
        httpx.AsyncClient(timeout=60) as http,
        aconnect_sse(http, "GET", f"{url}/changes", params=params) as source,
    ):
        assert source.response.status_code == 200
        async for sse in source.aiter_sse():
            if sse.event == "eose":
                ready.set()
            elif sse.event == "error":
                return seqs, json.loads(sse.data)
            elif sse.id:
                seqs.append(int(sse.id.rpartition(".")[2]))
    return seqs, None


async def sse_error(url: str, since: str, ready: asyncio.Event) -> tuple[list[int], dict[str, Any]]:
    """The seqs a live tail from ``since`` sends, and the error event ending it."""
    seqs, error = await live_tail(url, since, ready)
    assert error is not None, "the stream ended without an error event"
    return seqs, error


async def sse_seqs(url: str, since: str, until: int, ready: asyncio.Event) -> list[int]:
    """The seqs of the ops a live tail from ``since`` sends up to ``until``."""
    seqs, error = await live_tail(url, since, ready, until)
    assert error is None, error
    return seqs


async def follower_past_lost_commits(
    db: str, http: httpx.AsyncClient, url: str, kept: list[str], lost: list[str]
) -> tuple[str, int, int, asyncio.Task[tuple[list[int], dict[str, Any]]]]:
    """Post ``kept``, snapshot the database, post ``lost`` (the commits a
    server crash would lose), and start a live follower at the head past
    them, caught up; returns (epoch, kept head, follower's token seq, its
    task, which ends with the error event that tells it)."""
    await post(http, url, kept)
    epoch, kept_head = await feed_head(http, url)
    await snapshot(db)
    await post(http, url, lost)
    _, read_to = await feed_head(http, url)  # a consumer read this far
    ready = asyncio.Event()
    follower = asyncio.create_task(sse_error(url, f"{epoch}.{read_to}", ready))
    await asyncio.wait_for(ready.wait(), 10)
    return epoch, kept_head, read_to, follower


async def test_a_running_relay_reaching_a_restarted_server_starts_a_new_epoch() -> None:
    first, lost, later = (mixed_workload(12, seed=s, now_ms=PAST_MS) for s in (81, 82, 83))
    async with scratch_database() as db:
        relay = create_relay(PostgresStore(db + ASYNC), config=RelayConfig(feed_heartbeat_s=1.0))
        async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(timeout=30) as http:
            epoch, kept_head, read_to, follower = await follower_past_lost_commits(
                db, http, url, first, lost
            )
            await restore(db)  # the server came back without the last commits
            recorded = await restart(db)
            assert recorded["async_commits"] is True
            assert await end_connections(db) > 0

            new_epoch, head = await once_reconnected(lambda: feed_head(http, url))
            assert head == kept_head and new_epoch != epoch
            sent, told = await asyncio.wait_for(follower, 20)  # the live follower is told
            assert sent == [] and told["status"] == 410 and told["epoch"] == new_epoch
            # a follower of the new epoch, live from its head, gets every op
            # that takes a lost seq (the relay knew a head past the log's)
            ready = asyncio.Event()
            until = kept_head + len(later)
            since = f"{new_epoch}.{kept_head}"
            tail = asyncio.create_task(sse_seqs(url, since, until, ready))
            await asyncio.wait_for(ready.wait(), 10)
            await once_reconnected(lambda: post(http, url, later))  # the lost ops' seqs
            assert await asyncio.wait_for(tail, 20) == list(range(kept_head + 1, until + 1))
            gone = await http.get(f"{url}/changes", params={"since": f"{epoch}.{read_to}"})
            assert gone.status_code == 410 and gone.json()["epoch"] == new_epoch


async def test_a_follower_is_told_before_any_op_committed_after_the_restart() -> None:
    # the relay commits on its new connections before its feed reads the
    # epoch again: no op past the follower's old token may reach it as if
    # it followed the ops it holds
    first, lost, later = (mixed_workload(n, seed=s, now_ms=PAST_MS) for n, s in
                          ((8, 85), (6, 86), (24, 87)))  # fmt: skip
    async with scratch_database() as db:
        relay = create_relay(PostgresStore(db + ASYNC), config=RelayConfig(feed_heartbeat_s=1.0))
        async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(timeout=30) as http:
            _, kept_head, read_to, follower = await follower_past_lost_commits(
                db, http, url, first, lost
            )
            await restore(db)
            await restart(db)
            await end_connections(db)
            await once_reconnected(lambda: post(http, url, later))  # past read_to
            sent, told = await asyncio.wait_for(follower, 20)
            assert sent == [] and told["status"] == 410
            assert (await feed_head(http, url))[1] == kept_head + len(later) > read_to


async def test_a_running_relay_with_synchronous_commits_keeps_its_epoch() -> None:
    async with scratch_database(synchronous_commit="off") as db:  # the server's default
        relay = create_relay(PostgresStore(db), config=RelayConfig(feed_heartbeat_s=1.0))
        async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(timeout=30) as http:
            await post(http, url, mixed_workload(12, seed=84, now_ms=PAST_MS))
            epoch, head = await feed_head(http, url)
            recorded = await restart(db)
            assert recorded["async_commits"] is False
            assert await end_connections(db) > 0
            assert await once_reconnected(lambda: feed_head(http, url)) == (epoch, head)
            resumed = await http.get(f"{url}/changes", params={"since": f"{epoch}.{head}"})
            assert resumed.status_code == 200
        async with database(db) as conn:  # the new start was seen and recorded
            row = await conn.fetchrow(
                "SELECT started = pg_postmaster_start_time() AS now, async_commits "
                "FROM server_start"
            )
            assert row is not None and row["now"] is True and row["async_commits"] is False


async def opened_epoch(url: str, schema: str) -> str:
    store = PostgresStore(url, schema=schema)
    await store.open()
    try:
        return await store.get_feed_epoch()
    finally:
        await store.close()


async def test_opening_after_a_restart_that_followed_async_commits_starts_a_new_epoch() -> None:
    async with pg_schema() as schema:
        epoch = await opened_epoch(PG_URL + ASYNC, schema)
        assert await opened_epoch(PG_URL + ASYNC, schema) == epoch  # no restart
        await restart(PG_URL, schema)
        new = await opened_epoch(PG_URL + ASYNC, schema)
        assert new != epoch
        assert await opened_epoch(PG_URL + ASYNC, schema) == new  # once per restart


async def test_synchronous_commits_after_async_ones_still_start_a_new_epoch() -> None:
    # the commits that may be lost are those made before the restart
    async with pg_schema() as schema:
        epoch = await opened_epoch(PG_URL + ASYNC, schema)
        await restart(PG_URL, schema)
        assert await opened_epoch(PG_URL, schema) != epoch


async def test_synchronous_commits_keep_the_epoch_over_a_restart() -> None:
    async with pg_schema() as schema:
        epoch = await opened_epoch(PG_URL, schema)
        await restart(PG_URL, schema)
        assert await opened_epoch(PG_URL, schema) == epoch
        assert await opened_epoch(PG_URL + ASYNC, schema) == epoch  # async from now on


async def test_a_store_that_never_recorded_a_start_records_it_and_keeps_the_epoch() -> None:
    # upgraded from schema v9: whatever happened before is not known
    async with pg_schema() as schema:
        epoch = await opened_epoch(PG_URL + ASYNC, schema)
        async with database(PG_URL, schema) as conn:
            await conn.execute("UPDATE server_start SET started = NULL")
        assert await opened_epoch(PG_URL + ASYNC, schema) == epoch
        await restart(PG_URL, schema)  # recorded again: the next restart counts
        assert await opened_epoch(PG_URL + ASYNC, schema) != epoch


async def test_stores_reaching_a_restarted_server_together_start_one_epoch() -> None:
    async with pg_schema() as schema:
        await opened_epoch(PG_URL + ASYNC, schema)
        await restart(PG_URL, schema)
        stores = [PostgresStore(PG_URL + ASYNC, schema=schema) for _ in range(3)]
        await asyncio.wait_for(asyncio.gather(*(s.open() for s in stores)), 30)
        try:
            assert len({await s.get_feed_epoch() for s in stores}) == 1
        finally:
            for s in stores:
                await s.close()
