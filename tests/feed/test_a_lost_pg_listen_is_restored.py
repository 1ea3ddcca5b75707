"""Two workers on one Postgres database: a commit by one wakes the other's
subscribers within 1 s because the other LISTENs. That LISTEN dies with its
connection (a server restart, ``pg_terminate_backend``, a network blip);
the store hears the loss, the hub polls at its base interval until the
store LISTENs again, and the store then tells the head as of then, so a
commit made during the gap is not left to the next poll. Stopping the hub,
or closing the store, stops the reconnecting at once, even in a backoff.
The backoff is jittered: workers that lose their LISTEN together (a server
restart) do not all reconnect at the same instants.

Each worker is a ``PostgresStore`` of its own on one scratch database (the
LISTEN connection is ended from outside, and new connections to the
database are refused to hold the store in its backoff). A network blip is
a proxy that stops passing data on the connections open through it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import asyncpg
import pytest

from relay.feed.hub import FeedHub
from stores import postgres_listen
from stores.postgres import PostgresStore
from stores.postgres_listen import BACKOFF_FIRST_S, BACKOFF_MAX_S, backoff_s
from tests.stores.conftest import append, op
from tests.support.backends import PG_URL, selected_backends
from tests.support.freezing_proxy import FreezingProxy, through
from tests.support.scratch_database import scratch_database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected"),
]

WAKE_S = 1.0  # the issue: a commit on any worker wakes subscribers on every worker within 1 s
LOST = "lost the LISTEN connection"
BACK = "LISTENing on Postgres"


async def admin(sql: str, *args: object) -> object:
    conn = await asyncpg.connect(PG_URL)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def end_listen(url: str) -> int:
    """End the LISTEN connections to ``url``'s database; how many were ended.
    (The store names them by ``application_name``; the statement they last
    ran finds them too, when no check has run since.)"""
    ended = await admin(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = $1 AND (application_name = 'dfos-relay-listen' "
        "OR query LIKE 'LISTEN %')",
        urlsplit(url).path.lstrip("/"),
    )
    return int(str(ended))


async def listening(url: str) -> int:
    """How many connections to ``url``'s database LISTEN on some channel."""
    found = await admin(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
        "AND application_name = 'dfos-relay-listen'",
        urlsplit(url).path.lstrip("/"),
    )
    return int(str(found))


async def allow_connections(url: str, allow: bool) -> None:
    name = urlsplit(url).path.lstrip("/")
    await admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allow).lower()}')


@asynccontextmanager
async def two_workers(
    poll_interval_s: float,
) -> AsyncIterator[tuple[str, FeedHub, PostgresStore, PostgresStore]]:
    """A hub watching store ``a`` (its worker's feed), and store ``b`` (the
    other worker, which commits), on one scratch database."""
    async with scratch_database() as url:
        a, b = PostgresStore(url), PostgresStore(url)
        await a.open()
        await b.open()
        hub = FeedHub(a.log_length, poll_interval_s=poll_interval_s, heartbeat_s=60.0)
        await hub.watch(a)
        try:
            yield url, hub, a, b
        finally:
            await allow_connections(url, True)
            await hub.close()
            await a.close()
            await b.close()


async def wake_after_commit(hub: FeedHub, store: PostgresStore, cid: str) -> float:
    """Seconds from a commit through ``store`` to the wake-up of a
    subscriber of ``hub`` (at most 5: then the test fails)."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_task(hub.wait(hub.version))
    await asyncio.sleep(0)
    start = loop.time()
    head = await append(store, op(cid))
    async with asyncio.timeout(5):
        assert await waiter is True
    assert hub.known_head == head
    return loop.time() - start


def records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


async def test_a_killed_listen_is_heard_and_restored_without_missing_a_commit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "dfos_relay.store")
    # a poll so slow it wakes nobody here: only the store's push does
    async with two_workers(poll_interval_s=60.0) as (url, hub, _a, b):
        assert await wake_after_commit(hub, b, "before") < WAKE_S
        assert await end_listen(url) == 1
        # committed before the store LISTENs again: its NOTIFY reaches nobody,
        # the head told after the reconnect wakes the subscriber
        assert await wake_after_commit(hub, b, "in-the-gap") < WAKE_S
        # and the new LISTEN hears the next commits
        assert await listening(url) == 1
        assert await wake_after_commit(hub, b, "after") < WAKE_S
    assert [r.levelno for r in records(caplog, LOST)] == [logging.WARNING]
    assert [r.levelno for r in records(caplog, BACK)] == [logging.INFO]


async def test_while_the_listen_is_down_the_hub_polls_at_its_base_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "dfos_relay.store")
    async with two_workers(poll_interval_s=0.1) as (url, hub, _a, b):
        # pushed: the hub's poll, a safety net, has just begun a 2 s sleep
        assert await wake_after_commit(hub, b, "pushed") < WAKE_S
        await allow_connections(url, False)  # the store cannot LISTEN again
        assert await end_listen(url) == 1
        for cid in ("first", "second", "third"):
            # the rest of that sleep, or the next one, would take ~2 s
            assert await wake_after_commit(hub, b, cid) < WAKE_S
        assert len(records(caplog, LOST)) == 1  # one warning, not one per retry
        assert records(caplog, BACK) == []


async def test_a_listen_that_dies_silently_is_found_by_its_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the check runs every 5 s; here often enough to time the wake-up
    monkeypatch.setattr(postgres_listen, "CHECK_INTERVAL_S", 0.1)
    monkeypatch.setattr(postgres_listen, "CHECK_TIMEOUT_S", 0.2)
    server = urlsplit(PG_URL)
    proxy = FreezingProxy(server.hostname or "127.0.0.1", server.port or 5432)
    async with scratch_database() as url, proxy.serving():
        a, b = PostgresStore(through(proxy, url)), PostgresStore(url)
        hub = FeedHub(a.log_length, poll_interval_s=60.0, heartbeat_s=60.0)
        try:
            await a.open()
            await b.open()
            await hub.watch(a)
            assert await wake_after_commit(hub, b, "before") < WAKE_S
            proxy.freeze()  # a's LISTEN (and pool) hear nothing, and no error
            assert await wake_after_commit(hub, b, "in-the-blip") < WAKE_S
            assert await wake_after_commit(hub, b, "after") < WAKE_S
        finally:
            await proxy.cut()  # what a frozen connection waits on fails at once
            await hub.close()
            await a.close()
            await b.close()


@pytest.mark.parametrize("closing", ["hub", "store"])
async def test_closing_during_a_reconnect_backoff_returns_at_once(
    caplog: pytest.LogCaptureFixture, closing: str
) -> None:
    caplog.set_level(logging.INFO, "dfos_relay.store")
    async with two_workers(poll_interval_s=0.25) as (url, hub, a, _b):
        await allow_connections(url, False)
        assert await end_listen(url) == 1
        async with asyncio.timeout(5):
            while not records(caplog, LOST):
                await asyncio.sleep(0.02)
        await asyncio.sleep(1.0)  # a few refused reconnects: it is in a backoff
        loop = asyncio.get_running_loop()
        start = loop.time()
        await (hub.close() if closing == "hub" else a.close())
        assert loop.time() - start < 0.5
        await allow_connections(url, True)
        await asyncio.sleep(3.0)  # a reconnect still going would be back (its backoff: <= 1.6 s)
        assert await listening(url) == 0
        assert records(caplog, BACK) == []


async def test_a_server_that_drops_every_listen_is_not_retried_in_a_tight_loop() -> None:
    async with two_workers(poll_interval_s=0.25) as (url, _hub, _a, _b):
        database = urlsplit(url).path.lstrip("/")
        killer = await asyncpg.connect(PG_URL)
        try:
            loop = asyncio.get_running_loop()
            ended, until = 0, loop.time() + 3.0
            while loop.time() < until:  # each LISTEN connection ended as soon as it is seen
                ended += int(
                    await killer.fetchval(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = $1 AND application_name = 'dfos-relay-listen'",
                        database,
                    )
                )
                await asyncio.sleep(0.02)
        finally:
            await killer.close()
        # 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s: about 5 in 3 s, not one every 0.1 s
        assert 2 <= ended <= 8
        async with asyncio.timeout(BACKOFF_MAX_S + 2):  # and it comes back once let
            while await listening(url) != 1:
                await asyncio.sleep(0.05)


@pytest.mark.parametrize("draw", [0.0, 0.5, 0.999])
def test_reconnects_back_off_to_a_bound_and_never_retry_at_once(draw: float) -> None:
    waits = [backoff_s(n, draw) for n in range(100)]
    assert BACKOFF_FIRST_S / 2 <= waits[0] <= BACKOFF_FIRST_S
    assert waits == sorted(waits) and max(waits) <= BACKOFF_MAX_S
    assert sum(waits[:10]) >= 10  # ten failures in a row take at least 10 s


def test_each_wait_is_drawn_from_the_upper_half_of_its_bound() -> None:
    for failures in range(20):
        bound = min(BACKOFF_FIRST_S * 2**failures, BACKOFF_MAX_S)
        low, mid, high = (backoff_s(failures, draw) for draw in (0.0, 0.5, 0.999))
        assert low == bound / 2 < mid < high < bound


async def test_workers_that_lose_their_listen_together_reconnect_at_different_instants() -> None:
    workers = 8
    async with scratch_database() as url:
        stores = [PostgresStore(url) for _ in range(workers)]
        try:
            for store in stores:
                await store.open()
                assert await store.watch_commits(lambda _head: None, lambda _up: None)
            await allow_connections(url, False)  # a server restart: down a while...
            assert await end_listen(url) == workers
            await asyncio.sleep(2.0)
            await allow_connections(url, True)  # ...then each reconnects at its next try
            async with asyncio.timeout(BACKOFF_MAX_S + 2):
                while await listening(url) != workers:
                    await asyncio.sleep(0.05)
            spread = await admin(
                "SELECT extract(epoch FROM max(backend_start) - min(backend_start)) "
                "FROM pg_stat_activity WHERE datname = $1 "
                "AND application_name = 'dfos-relay-listen'",
                urlsplit(url).path.lstrip("/"),
            )
            # unjittered, all at once (within ~16 ms here); jittered, each at
            # its next try after ~2 s, spread over ~1.5 s: eight within 0.1 s
            # by chance, under 1 in 300000 (simulated)
            assert float(str(spread)) > 0.1
        finally:
            await allow_connections(url, True)
            for store in stores:
                await store.close()
