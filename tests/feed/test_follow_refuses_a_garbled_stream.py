"""The feed client (``peer.feed.follow``) against peers whose streams are
odd: an event whose data is not a JSON object breaks the connection like
any other fault of the stream (retried with backoff, then a typed error),
never a stray ``ValueError`` out of the follower; so does an event id too
long to be a progress token (the follower would save it as the peer's
cursor and send it back in a URL); a live stream the peer ends
before ``until_seq`` is resumed, not taken for the end."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from peer.feed import FeedClientError, FollowOptions, follow

GARBLED = {
    "not-json": "not json",
    "not-an-object": "[1, 2]",
    "nested-too-deep": "[" * 5000 + "]" * 5000,
}


def _peer(data: str, token: str = "e.1", event: str = "op") -> Starlette:
    async def changes(request: Request) -> Response:
        body = f"event: {event}\nid: {token}\ndata: {data}\n\n"
        return Response(body, media_type="text/event-stream")

    return Starlette(routes=[Route("/changes", changes)])


@pytest.mark.parametrize("data", GARBLED.values(), ids=GARBLED.keys())
async def test_an_event_that_is_not_a_json_object_is_a_stream_fault(data: str) -> None:
    transport = httpx.ASGITransport(app=_peer(data))
    options = FollowOptions(live=False, max_retries=1, backoff_base_s=0.01)
    async with httpx.AsyncClient(transport=transport) as http:
        with pytest.raises(FeedClientError, match=r"gave up after 2 failures.*not a JSON object"):
            async for _ in follow("http://peer.test", options=options, client=http):
                raise AssertionError("no event should come out of a garbled stream")


@pytest.mark.parametrize("event", ["op", "eose"])
async def test_an_event_id_too_long_for_a_token_is_a_stream_fault(event: str) -> None:
    transport = httpx.ASGITransport(app=_peer('{"seq": 1}', "e." + "1" * 100_000, event))
    options = FollowOptions(live=False, max_retries=0)
    async with httpx.AsyncClient(transport=transport) as http:
        with pytest.raises(FeedClientError, match="not a token"):
            async for _ in follow("http://peer.test", options=options, client=http):
                raise AssertionError("no event should come out with that id")


async def test_a_live_stream_ended_before_until_seq_is_resumed() -> None:
    served: list[str] = []

    async def changes(request: Request) -> Response:
        since = int(request.query_params.get("since", "0").rpartition(".")[2])
        served.append(str(since))
        ops = "".join(
            f'event: op\nid: e.{seq}\ndata: {{"seq": {seq}}}\n\n'
            for seq in range(since + 1, since + 3)
        )  # two ops a connection, then the stream ends cleanly
        return Response(ops, media_type="text/event-stream")

    app = Starlette(routes=[Route("/changes", changes)])
    options = FollowOptions(live=True, until_seq=5, backoff_base_s=0.01)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        seqs = [
            e.data["seq"] async for e in follow("http://peer.test", options=options, client=http)
        ]
    assert seqs[:5] == [1, 2, 3, 4, 5] and served[:3] == ["0", "2", "4"]
