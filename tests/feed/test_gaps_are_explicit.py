"""Gaps are explicit, never silent: 410 Gone for a token of another epoch or
a position below the replay window, 400 ahead of the head or for malformed
input, 503 + Retry-After over the subscriber cap; on both transports."""

from __future__ import annotations

import json

import httpx
import pytest
import websockets

from relay import create_relay
from relay.config import RelayConfig
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS

from .conftest import Served, ws_frames_until


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
        # the slot is freed when the socket goes
        async with httpx.AsyncClient() as http:
            for _ in range(50):
                if (await http.get(f"{url}/changes")).status_code == 200:
                    break
            else:
                raise AssertionError("the subscriber slot was never freed")
