"""``/changes`` answers only GET (and HEAD): any other method is the JSON
405 of every route, ``{"error": "method not allowed"}``, with the ``Allow``
header that a 405 must carry (RFC 9110, 15.5.6). The handler of Starlette's
405 built the JSON body and dropped the header Starlette gave it. A HEAD is
admitted as a GET is and answers its headers only; its subscriber slot is
given back (the cap of one admits the next)."""

from __future__ import annotations

import httpx
import pytest

from relay import create_relay
from relay.config import RelayConfig
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
async def test_another_method_is_a_json_405_that_names_get_and_head(method: str) -> None:
    async with (
        serve_on_loopback(create_relay(MemoryStore()).app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
    ):
        answer = await http.request(method, "/changes?since=0", content=b"{}")
        assert answer.status_code == 405
        assert answer.json() == {"error": "method not allowed"}
        allowed = {m.strip() for m in answer.headers.get("allow", "").split(",")}
        assert allowed == {"GET", "HEAD"}


async def test_a_head_answers_headers_and_gives_its_slot_back() -> None:
    relay = create_relay(MemoryStore(), config=RelayConfig(feed_max_subscribers=1))
    async with (
        serve_on_loopback(relay.app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
    ):
        for _ in range(3):
            answer = await http.head("/changes?since=0")
            assert answer.status_code == 200 and answer.content == b""
            assert answer.headers["content-type"].startswith("text/event-stream")
        assert relay.feed.subscribers == {"sse": 0, "websocket": 0}
        answer = await http.get("/changes?since=0")
        assert answer.status_code == 200 and "event: eose" in answer.text
