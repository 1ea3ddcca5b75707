"""The changes-feed client inflates a compressed stream in bounded steps
and reads at most ``MAX_ERROR_BYTES`` of a refusal: a few kilobytes of
gzip (one layer or nested) that inflate to hundreds of megabytes, or an
error page that never ends, are a broken connection, not memory the
relay must find. A compressed feed within the bounds is followed."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator

import pytest

from peer.feed import FeedClientError, FeedEvent, FollowOptions, follow

from .hostile_http import Answer, encoded, raw_peer

INFLATED = 256 * 1024 * 1024
PEAK = 16 * 1024 * 1024


async def drain(events: AsyncIterator[FeedEvent]) -> list[FeedEvent]:
    return [event async for event in events]


def sending(body: bytes, encoding: str) -> Answer:
    return encoded(body, encoding, "text/event-stream")


async def peak_of_following(answer: Answer) -> int:
    options = FollowOptions(live=False, max_retries=0)
    async with raw_peer(answer) as url:
        tracemalloc.start()
        try:
            with pytest.raises(FeedClientError):
                await asyncio.wait_for(drain(follow(url, options=options)), 60)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


@pytest.mark.parametrize(("encoding", "layers"), [("gzip", 1), ("gzip, gzip", 2)])
async def test_a_compressed_feed_bomb_is_cut_off_while_inflating(
    encoding: str, layers: int
) -> None:
    body = b"event: op\ndata: " + b"a" * INFLATED
    for _ in range(layers):
        body = gzip.compress(body, 9)
    peak = await peak_of_following(sending(body, encoding))
    assert peak < PEAK, f"{peak} bytes held for one event"


@pytest.mark.parametrize("status", [500, 410, 400])
async def test_an_endless_refusal_is_read_only_up_to_its_bound(status: int) -> None:
    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(f"HTTP/1.1 {status} No\r\ncontent-type: application/json\r\n\r\n".encode())
        for _ in range(INFLATED // 65536):
            writer.write(b" " * 65536)
            await writer.drain()

    peak = await peak_of_following(answer)
    assert peak < PEAK, f"{peak} bytes held for a refusal"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compressed_feed_within_the_bounds_is_followed(encoding: str) -> None:
    stream = (
        b'event: status\ndata: {"headSeq": 1}\n\n'
        b'event: op\nid: e.1\ndata: {"seq": 1, "cid": "c\xc3\xa9"}\n\n'
        b'event: eose\nid: e.1\ndata: {"seq": 1}\n\n'
    )
    body = gzip.compress(stream) if encoding == "gzip" else zlib.compress(stream)
    async with raw_peer(sending(body, encoding)) as url:
        events = await drain(follow(url, options=FollowOptions(live=False, max_retries=0)))
    assert [e.kind for e in events] == ["status", "op", "eose"]
    assert events[1].data["cid"] == "cé" and events[2].token == "e.1"
