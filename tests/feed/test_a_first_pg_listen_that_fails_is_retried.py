"""A worker whose first LISTEN fails (the server refusing connections as
the relay starts: a restart, a failover) keeps trying, with the backoff of
a lost LISTEN: the hub polls at its base interval meanwhile, and once the
store LISTENs it tells the head as of then (a commit made meanwhile wakes
subscribers at once) and the hub goes back to its slow poll. Closing the
hub or the store stops the trying at once.

As in ``test_a_lost_pg_listen_is_restored``: each worker is a
``PostgresStore`` of its own on one scratch database, opened, and then new
connections to the database are refused."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import pytest

from relay.feed.hub import FeedHub
from stores.postgres import PostgresStore
from stores.postgres_listen import BACKOFF_MAX_S
from tests.feed.test_a_lost_pg_listen_is_restored import (
    BACK,
    WAKE_S,
    allow_connections,
    listening,
    records,
    wake_after_commit,
)
from tests.stores.conftest import append, op
from tests.support.backends import PG_URL, selected_backends
from tests.support.freezing_proxy import FreezingProxy, through
from tests.support.scratch_database import scratch_database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected"),
]

CANNOT = "cannot LISTEN"


class CountedPolls:
    """The hub's head-seq poll of ``store``, counting the polls done."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self.done = 0

    async def __call__(self) -> int:
        head = await self._store.log_length()
        self.done += 1
        return head


@asynccontextmanager
async def refused_at_start(
    poll_interval_s: float, proxy: FreezingProxy | None = None
) -> AsyncIterator[tuple[str, FeedHub, CountedPolls, PostgresStore, PostgresStore]]:
    """A hub watching store ``a`` (through ``proxy`` if given), started while
    the database refuses new connections, and store ``b``, which commits."""
    async with scratch_database() as url:
        a = PostgresStore(through(proxy, url) if proxy else url)
        b = PostgresStore(url)
        await a.open()
        await b.open()
        polls = CountedPolls(a)
        hub = FeedHub(polls, poll_interval_s=poll_interval_s, heartbeat_s=60.0)
        await allow_connections(url, False)
        await hub.watch(a)
        try:
            yield url, hub, polls, a, b
        finally:
            await allow_connections(url, True)
            await hub.close()
            await a.close()
            await b.close()


async def test_a_refused_first_listen_is_retried_and_tells_what_was_committed_meanwhile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "dfos_relay.store")
    # a poll so slow it wakes nobody here: only the store's push does
    async with refused_at_start(poll_interval_s=60.0) as (url, hub, polls, _a, b):
        waiter = asyncio.get_running_loop().create_task(hub.wait(hub.version))
        async with asyncio.timeout(5):
            while polls.done < 1:  # the poller's first round; the next is in 60 s
                await asyncio.sleep(0.02)
        head = await append(b, op("while-refused"))
        await asyncio.sleep(1.0)  # a few refused tries
        assert not waiter.done()
        await allow_connections(url, True)
        async with asyncio.timeout(BACKOFF_MAX_S + 2):  # its next try LISTENs
            assert await waiter is True
        assert hub.known_head == head
        assert await listening(url) == 1
        assert await wake_after_commit(hub, b, "after") < WAKE_S
    assert [r.levelno for r in records(caplog, CANNOT)] == [logging.WARNING]  # not one per try
    assert [r.levelno for r in records(caplog, BACK)] == [logging.INFO]


async def test_until_its_first_listen_the_hub_polls_at_its_base_interval() -> None:
    async with refused_at_start(poll_interval_s=0.1) as (url, hub, polls, _a, b):
        assert await wake_after_commit(hub, b, "while-refused") < WAKE_S
        waiter = asyncio.get_running_loop().create_task(hub.wait(hub.version))
        try:
            before = polls.done
            await asyncio.sleep(1.0)
            assert polls.done - before >= 5  # ~10 at 0.1 s
            await allow_connections(url, True)
            async with asyncio.timeout(BACKOFF_MAX_S + 2):  # its next try LISTENs
                while await listening(url) != 1:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)  # the rest of a 0.1 s sleep, then a 2 s one
            before = polls.done
            await asyncio.sleep(1.5)
            assert polls.done - before <= 1  # pushed: the poll is a safety net again
            assert await wake_after_commit(hub, b, "pushed") < WAKE_S
        finally:
            waiter.cancel()


@pytest.mark.parametrize("closing", ["hub", "store"])
async def test_closing_while_the_first_listen_is_retried_returns_at_once(
    caplog: pytest.LogCaptureFixture, closing: str
) -> None:
    caplog.set_level(logging.INFO, "dfos_relay.store")
    server = urlsplit(PG_URL)
    # nobody subscribes, so nothing but the LISTEN tries connects through it
    proxy = FreezingProxy(server.hostname or "127.0.0.1", server.port or 5432)
    async with (
        proxy.serving(),
        refused_at_start(poll_interval_s=0.25, proxy=proxy) as (url, hub, _p, a, _b),
    ):
        tried = proxy.accepted
        await asyncio.sleep(1.0)
        assert proxy.accepted - tried >= 2  # it keeps trying: it is in a backoff
        loop = asyncio.get_running_loop()
        start = loop.time()
        await (hub.close() if closing == "hub" else a.close())
        assert loop.time() - start < 0.5
        tried = proxy.accepted
        await allow_connections(url, True)
        await asyncio.sleep(3.0)  # a try still going would be back (its backoff: <= 1.6 s)
        assert proxy.accepted == tried
        assert await listening(url) == 0
    assert records(caplog, BACK) == []
