"""The changes-feed client holds at most ``MAX_EVENT_BYTES`` of one event:
a peer streaming a line (or an event of many lines) that never ends is a
broken connection, not a buffer that grows until the relay runs out of
memory."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from peer.feed import FeedClientError, FeedEvent, FollowOptions, follow

from .hostile_http import Answer, head, raw_peer

STREAMED = 64 * 1024 * 1024


async def drain(events: AsyncIterator[FeedEvent]) -> None:
    async for _ in events:
        pass


def endless(line: bytes) -> Answer:
    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(head({"content-type": "text/event-stream"}) + b"event: op\n")
        block = line * (64 * 1024 // len(line))
        for _ in range(STREAMED // len(block)):
            writer.write(block)
            await writer.drain()

    return answer


@pytest.mark.parametrize(
    "line", [b"data: " + b"a" * 1018, b"data: a\n"], ids=["one-endless-line", "endless-data-lines"]
)
async def test_a_feed_event_is_bounded(line: bytes) -> None:
    options = FollowOptions(live=False, max_retries=0)
    async with raw_peer(endless(line)) as url:
        tracemalloc.start()
        try:
            with pytest.raises(FeedClientError):
                await asyncio.wait_for(drain(follow(url, options=options)), 60)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"{peak} bytes held for one event"
