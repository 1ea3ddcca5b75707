"""Gaps are explicit, never silent: 410 Gone for a token of another epoch or
a position below the replay window, 400 ahead of the head or for malformed
input, 503 + Retry-After over the subscriber cap; on both transports. A live
follow whose epoch changes under it ends with the same 410 body."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from httpx_sse import aconnect_sse

from peer.feed import FeedGapError, follow
from relay import create_relay
from relay.config import RelayConfig
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS

from .conftest import Served, read_sse, ws_frames_until


async def test_token_from_before_an_epoch_reset_is_410(served: Served) -> None:
    await served.relay.ingest(mixed_workload(10, seed=61, now_ms=PAST_MS))
    old = await served.relay.store.get_feed_epoch()
    await served.relay.store.reset_feed_epoch()
    new = await served.relay.store.get_feed_epoch()
    async with httpx.AsyncClient() as http:
        gone = await http.get(f"{served.url}/changes", headers={"Last-Event-ID": f"{old}.3"})
        assert gone.status_code == 410
        body = gone.json()
        assert body["epoch"] == new and body["minSeq"] == 1 and "error" in body
        assert body["bootstrap"].endswith("/changes?mode=bootstrap")
        assert (await http.get(body["bootstrap"])).status_code == 200
        ok = await http.get(f"{served.url}/changes", params={"since": f"{new}.3"})
        assert ok.status_code == 200
        metrics = (await http.get(f"{served.url}/metrics")).text
    assert "dfos_relay_feed_gone_total 1.0" in metrics


async def _sse_error_after_eose(url: str, started: asyncio.Event) -> dict[str, object]:
    async with (
        httpx.AsyncClient(timeout=30) as http,
        aconnect_sse(http, "GET", f"{url}/changes", params={"live": "true"}) as source,
    ):
        async for sse in source.aiter_sse():
            if sse.event == "eose":
                started.set()
            if sse.event == "error":
                body: dict[str, object] = json.loads(sse.data)
                return body
    raise AssertionError("the stream ended without an error event")


async def _follow_until_gap(url: str, started: asyncio.Event) -> FeedGapError:
    try:
        async for event in follow(url):
            if event.kind == "eose":
                started.set()
    except FeedGapError as gap:
        return gap
    raise AssertionError("the follow ended without a gap")


async def test_a_live_follow_ends_with_410_when_the_epoch_changes(served: Served) -> None:
    # reset by another process (the reset-epoch command): seen at the next head poll
    await served.relay.ingest(mixed_workload(5, seed=64, now_ms=PAST_MS))
    old = await served.relay.store.get_feed_epoch()
    sse_ready, follow_ready = asyncio.Event(), asyncio.Event()
    async with websockets.connect(served.ws_url) as ws:
        await ws.send(json.dumps(["CHANGES", "s1", {"live": True}]))
        await ws_frames_until(ws, "s1", "EOSE")
        sse = asyncio.create_task(_sse_error_after_eose(served.url, sse_ready))
        client = asyncio.create_task(_follow_until_gap(served.url, follow_ready))
        await asyncio.wait_for(asyncio.gather(sse_ready.wait(), follow_ready.wait()), 10)
        await served.relay.store.reset_feed_epoch()
        new = await served.relay.store.get_feed_epoch()
        frames = await ws_frames_until(ws, "s1", "ERR")
        sse_body, gap = await asyncio.wait_for(asyncio.gather(sse, client), 10)
    assert new != old
    ws_body = frames[-1][3]
    for body in (ws_body, sse_body):
        assert body["status"] == 410 and body["epoch"] == new and body["minSeq"] == 1
        assert "/changes?mode=bootstrap" in str(body["bootstrap"])  # (and the filter)
        assert old in str(body["error"])
    assert gap.epoch == new and "/changes?mode=bootstrap" in gap.bootstrap
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(f"{served.url}/metrics")).text
    assert "dfos_relay_feed_gone_total 3.0" in metrics  # two SSE streams and the WebSocket


async def test_ahead_of_head_and_malformed_input_are_400(served: Served) -> None:
    await served.relay.ingest(mixed_workload(5, seed=62, now_ms=PAST_MS))
    head = await served.relay.store.log_length()
    async with httpx.AsyncClient() as http:
        ahead = await http.get(f"{served.url}/changes", params={"since": head + 1})
        assert ahead.status_code == 400 and ahead.json()["headSeq"] == head
        for query in (
            "since=abc", "since=1.2.3", "kinds=beacon,nope", "authors=alice", "chains=x",
            "limit=0", "until_seq=-1", "live=maybe", "mode=sideways", "since=1&since=2",
            "mode=bootstrap&since=3", "color=blue",
        ):  # fmt: skip
            response = await http.get(f"{served.url}/changes?{query}")
            assert response.status_code == 400, query
            assert "error" in response.json()


async def test_below_the_replay_window_is_410(store: RelayStore) -> None:
    relay = create_relay(store, config=RelayConfig(feed_replay_window=5))
    async with serve_on_loopback(relay.app) as url:
        await relay.ingest(mixed_workload(20, seed=63, now_ms=PAST_MS))
        head = await relay.store.log_length()
        async with httpx.AsyncClient() as http:
            described = (await http.get(f"{url}/.well-known/dfos-relay")).json()["changesFeed"]
            assert described["minSeq"] == head - 4
            gone = await http.get(f"{url}/changes", params={"since": 2})
            assert gone.status_code == 410 and gone.json()["minSeq"] == head - 4
            edge = await http.get(f"{url}/changes", params={"since": head - 5})
            assert edge.status_code == 200
            # no since is since 0: a gap too, never a tail that starts at minSeq unsaid
            unsaid = await http.get(f"{url}/changes", params={"kinds": "beacon"})
            assert unsaid.status_code == 410 and unsaid.json()["minSeq"] == head - 4
            # the bootstrap it names keeps the request's filter
            bootstrap = unsaid.json()["bootstrap"]
            assert "mode=bootstrap" in bootstrap and "kinds=beacon" in bootstrap
            kinds = {e[1]["kind"] for e in await read_sse(url, bootstrap.split("?", 1)[1])
                     if e[0] == "snapshot"}  # fmt: skip
            assert kinds == {"beacon"}
            # the log itself is unchanged
            log = (await http.get(f"{url}/log", params={"limit": 1000})).json()["entries"]
            assert len(log) == head
        async with websockets.connect("ws" + url.removeprefix("http") + "/changes") as ws:
            await ws.send(json.dumps(["CHANGES", "s", {"since": 1}]))
            [err] = await ws_frames_until(ws, "s", "ERR")
            assert err[3]["status"] == 410 and err[3]["minSeq"] == head - 4


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_over_the_subscriber_cap_is_503_with_retry_after(store: RelayStore) -> None:
    relay = create_relay(store, config=RelayConfig(feed_max_subscribers=1))
    async with serve_on_loopback(relay.app) as url:
        async with websockets.connect("ws" + url.removeprefix("http") + "/changes") as ws:
            await ws.send(json.dumps(["CHANGES", "held", {"live": True}]))
            await ws_frames_until(ws, "held", "EOSE")
            async with httpx.AsyncClient() as http:
                busy = await http.get(f"{url}/changes")
            assert busy.status_code == 503 and int(busy.headers["retry-after"]) > 0
            await ws.send(json.dumps(["CHANGES", "more", {}]))
            [err] = await ws_frames_until(ws, "more", "ERR")
            assert err[3]["status"] == 503 and err[3]["retryAfter"] > 0
        # the slot is freed when the socket goes
        async with httpx.AsyncClient() as http:
            for _ in range(50):
                if (await http.get(f"{url}/changes")).status_code == 200:
                    break
            else:
                raise AssertionError("the subscriber slot was never freed")


@pytest.mark.parametrize("store", ["memory", "sqlite"], indirect=True)
async def test_the_cap_holds_when_subscribers_arrive_together(store: RelayStore) -> None:
    relay = create_relay(store, config=RelayConfig(feed_max_subscribers=5))
    async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(timeout=30) as http:
        answers: list[int] = []

        async def open_one() -> None:
            async with http.stream("GET", f"{url}/changes?live=true") as response:
                answers.append(response.status_code)
                if response.status_code == 200:
                    await asyncio.sleep(30)  # admitted: it stays (live)

        opening = [asyncio.create_task(open_one()) for _ in range(20)]
        for _ in range(100):
            if len(answers) == 20:
                break
            await asyncio.sleep(0.05)
        assert sorted(answers) == [200] * 5 + [503] * 15
        assert relay.feed.subscribers["sse"] == 5
        for task in opening:
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_a_closed_or_replaced_websocket_subscription_gives_its_slot_back_at_once(
    store: RelayStore,
) -> None:
    relay = create_relay(store, config=RelayConfig(feed_max_subscribers=2))
    async with serve_on_loopback(relay.app) as url:
        async with websockets.connect("ws" + url.removeprefix("http") + "/changes") as ws:
            await ws.send(json.dumps(["CHANGES", "x", {"live": True}]))
            await ws_frames_until(ws, "x", "EOSE")
            for frame in (["CHANGES", "a", {}], ["CLOSE", "a"], ["CHANGES", "b", {}]):
                await ws.send(json.dumps(frame))  # back to back: "a" may never run
            frames = await ws_frames_until(ws, "b", "EOSE")
            assert frames[0][2] == "STATUS"
            for _ in range(3):  # a subId reused takes the slot of the one it replaces
                await ws.send(json.dumps(["CHANGES", "c", {"live": True}]))
            frames = await ws_frames_until(ws, "c", "EOSE")
            assert all(f[2] != "ERR" for f in frames)
        assert relay.feed.subscribers["websocket"] <= 2
