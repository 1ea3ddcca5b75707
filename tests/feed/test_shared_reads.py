"""Subscribers share the feed's store reads and encodings (relay.feed.cache):
many subscribers at one position, following live or catching up from far
behind what the cache keeps, each get every event once, in order. The
cache is made small here so that most reads go past it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from relay import create_relay
from relay.config import RelayConfig
from relay.feed.cache import EventCache
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS

from .conftest import Served, read_sse

READERS = 8


@pytest.fixture
async def small_cache(store: RelayStore) -> AsyncIterator[Served]:
    relay = create_relay(store, config=RelayConfig(feed_heartbeat_s=1.0))
    relay.feed.cache = EventCache(relay.store, max_entries=16)
    async with serve_on_loopback(relay.app) as url:
        yield Served(relay, url)


def _seqs(events: list[tuple[str, object, str]]) -> list[int]:
    return [data["seq"] for kind, data, _ in events if kind == "op" and isinstance(data, dict)]


async def test_readers_catching_up_together_from_far_behind(small_cache: Served) -> None:
    await small_cache.relay.ingest(mixed_workload(100, seed=91, now_ms=PAST_MS))
    head = await small_cache.relay.store.log_length()
    streams = await asyncio.wait_for(
        asyncio.gather(*(read_sse(small_cache.url, "since=0") for _ in range(READERS))), 60
    )
    for events in streams:
        assert _seqs(events) == list(range(1, head + 1))


async def test_live_followers_at_one_position_get_each_commit_once(small_cache: Served) -> None:
    relay, url = small_cache.relay, small_cache.url
    await relay.ingest(mixed_workload(10, seed=92, now_ms=PAST_MS))
    start = await relay.store.log_length()
    tokens = mixed_workload(60, seed=93, now_ms=PAST_MS)
    expected = len(tokens)  # all new: a fresh workload of its own identities
    query = f"since={start}&live=true&until_seq={start + expected}"
    readers = [asyncio.create_task(read_sse(url, query)) for _ in range(READERS)]
    await asyncio.sleep(0.3)  # they are following
    for i in range(0, len(tokens), 7):
        await relay.ingest(tokens[i : i + 7])
        await asyncio.sleep(0.01)
    streams = await asyncio.wait_for(asyncio.gather(*readers), 60)
    assert await relay.store.log_length() == start + expected
    for events in streams:
        assert _seqs(events) == list(range(start + 1, start + expected + 1))
