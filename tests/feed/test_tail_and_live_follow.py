"""Tail from a seq, live follow and resume by token, over SSE and over
WebSocket, through a real hypercorn server."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import websockets
from httpx_sse import aconnect_sse

from peer.feed import FeedEvent, FollowOptions, follow
from relay.testing.workload import mixed_workload
from tests.support.relay_api import PAST_MS

from .conftest import Served, read_sse, ws_frames_until


async def test_tail_sends_entries_after_since_then_eose(served: Served) -> None:
    await served.relay.ingest(mixed_workload(30, seed=51, now_ms=PAST_MS))
    head = await served.relay.store.log_length()
    events = await read_sse(served.url, "since=5")
    kinds = [e[0] for e in events]
    assert kinds[0] == "status" and kinds[-1] == "eose"
    ops = [e for e in events if e[0] == "op"]
    assert [e[1]["seq"] for e in ops] == list(range(6, head + 1))
    epoch = events[0][1]["epoch"]
    assert all(e[2] == f"{epoch}.{e[1]['seq']}" == e[1]["token"] for e in ops)
    assert events[-1][1]["seq"] == head


async def test_filters_limit_and_until_seq(served: Served) -> None:
    await served.relay.ingest(mixed_workload(40, seed=52, now_ms=PAST_MS))
    beacons = [e for e in await read_sse(served.url, "kinds=beacon,artifact") if e[0] == "op"]
    assert beacons and {e[1]["kind"] for e in beacons} <= {"beacon", "artifact"}
    some = [e for e in await read_sse(served.url, "since=0&limit=3") if e[0] == "op"]
    assert [e[1]["seq"] for e in some] == [1, 2, 3]
    upto = await read_sse(served.url, "until_seq=4")
    assert [e[1]["seq"] for e in upto if e[0] == "op"] == [1, 2, 3, 4]
    assert upto[-1][0] == "eose" and upto[-1][1]["seq"] == 4
    chain = beacons[0][1]["chainId"]
    mine = [e for e in await read_sse(served.url, f"chains={chain}") if e[0] == "op"]
    assert mine and {e[1]["chainId"] for e in mine} == {chain}


async def test_live_follow_over_sse_and_resume_by_token(served: Served) -> None:
    first = mixed_workload(20, seed=53, now_ms=PAST_MS)
    await served.relay.ingest(first)
    received: list[FeedEvent] = []
    caught_up = asyncio.Event()

    async def consume(since: str | None, stop_after: int) -> None:
        async for event in follow(served.url, since=since, options=FollowOptions(live=True)):
            received.append(event)
            if event.kind == "eose":
                caught_up.set()
            if sum(1 for e in received if e.kind == "op") >= stop_after:
                return

    head = await served.relay.store.log_length()
    second = mixed_workload(20, seed=54, now_ms=PAST_MS)
    task = asyncio.create_task(consume(None, head + len(second)))
    await asyncio.wait_for(caught_up.wait(), 10)
    await served.relay.ingest(second)  # after EOSE: these arrive live
    await asyncio.wait_for(task, 10)
    seqs = [e.data["seq"] for e in received if e.kind == "op"]
    assert seqs == list(range(1, head + len(second) + 1))

    # resume from a token in the middle: exactly the rest, nothing repeated
    middle = next(e.token for e in received if e.kind == "op" and e.data["seq"] == 10)
    rest: list[int] = []
    options = FollowOptions(live=False)
    async for event in follow(served.url, since=middle, options=options):
        if event.kind == "op":
            rest.append(event.data["seq"])
    assert rest == list(range(11, head + len(second) + 1))


async def test_last_event_id_resumes_an_sse_stream(served: Served) -> None:
    await served.relay.ingest(mixed_workload(15, seed=55, now_ms=PAST_MS))
    events = await read_sse(served.url, "since=0")
    token = [e for e in events if e[0] == "op"][6][2]
    resumed = await read_sse(served.url, "since=0", headers={"Last-Event-ID": token})
    first_seq = int(token.split(".")[1]) + 1
    assert next(e[1]["seq"] for e in resumed if e[0] == "op") == first_seq


async def test_websocket_subscriptions_tail_and_follow_live(served: Served) -> None:
    await served.relay.ingest(mixed_workload(20, seed=56, now_ms=PAST_MS))
    head = await served.relay.store.log_length()
    async with websockets.connect(served.ws_url) as ws:
        await ws.send(json.dumps(["CHANGES", "all", {"since": 0, "live": True}]))
        await ws.send(json.dumps(["CHANGES", "beacons", {"kinds": ["beacon"]}]))
        backlog: dict[str, list[object]] = {}
        frames = await ws_frames_until(ws, "all", "EOSE", backlog)
        assert frames[0][2] == "STATUS"
        assert [f[3] for f in frames if f[2] == "EVENT"] == list(range(1, head + 1))
        assert frames[-1][3] == head
        beacon_frames = await ws_frames_until(ws, "beacons", "EOSE", backlog)
        assert all(f[4]["kind"] == "beacon" for f in beacon_frames if f[2] == "EVENT")
        more = mixed_workload(10, seed=57, now_ms=PAST_MS)
        await served.relay.ingest(more)
        live: list[int] = []
        while len(live) < len(more):
            frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
            if frame[1] == "all" and frame[2] == "EVENT":
                live.append(frame[3])
        assert live == list(range(head + 1, head + len(more) + 1))
        await ws.send(json.dumps(["CLOSE", "all"]))
        await ws.send(json.dumps(["CHANGES", "bad", {"kinds": ["nope"]}]))
        [err] = await ws_frames_until(ws, "bad", "ERR")
        assert err[3]["status"] == 400 and "unknown kinds" in err[3]["error"]


async def test_a_websocket_message_that_is_not_a_request_gets_a_notice(served: Served) -> None:
    """Each bad message is answered on its own; the socket keeps serving."""
    async with websockets.connect(served.ws_url) as ws:
        await ws.send(b"\x00binary")  # a binary frame is not a request either
        frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert frame == ["NOTICE", "binary messages are not requests"]
    bad = {
        "not json": "message is not JSON",
        "[" * 5000 + "]" * 5000: "message is not JSON",  # nested past any parser's recursion
        '{"CHANGES": 1}': "expected",
        '["CHANGES", ""]': "subId",
        '["CHANGES", "s"]': "expected",  # a known verb with a part missing, or one too many
        '["CLOSE", "s", {}]': "expected",
        '["SUBSCRIBE", "s", {}]': "unknown message",
    }
    async with websockets.connect(served.ws_url) as ws:
        for message, notice in bad.items():
            await ws.send(message)
            frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert frame[0] == "NOTICE" and frame[1].startswith(notice), (message[:20], frame)
        await ws.send(json.dumps(["CHANGES", "ok", {"since": 0}]))
        frames = await ws_frames_until(ws, "ok", "EOSE")
        assert frames[0][2] == "STATUS"


async def _read_while_more_commit(
    served: Served, seed: int, query: Callable[[int, int], str]
) -> tuple[int, int, list[tuple[str, Any, str]]]:
    """Ten ops stored, then a stream of ``query(head, until)`` read while five
    more commit: (head, until, its events)."""
    await served.relay.ingest(mixed_workload(10, seed=seed, now_ms=PAST_MS))
    head = await served.relay.store.log_length()
    more = mixed_workload(5, seed=seed + 1, now_ms=PAST_MS)
    until = head + len(more)
    reader = asyncio.create_task(read_sse(served.url, query(head, until)))
    await asyncio.sleep(0.3)
    await served.relay.ingest(more)
    return head, until, await asyncio.wait_for(reader, 30)


async def test_a_live_tail_with_a_limit_stays_open_after_the_replay(served: Served) -> None:
    """``limit`` bounds the replay (EOSE comes after it); live goes on from
    there: the rest of the backlog, then new commits."""
    _, until, events = await _read_while_more_commit(
        served, 58, lambda head, until: f"since=0&live=true&limit=3&until_seq={until}"
    )
    kinds = [e[0] for e in events]
    assert kinds[:5] == ["status", "op", "op", "op", "eose"] and events[4][1]["seq"] == 3
    assert [e[1]["seq"] for e in events if e[0] == "op"] == list(range(1, until + 1))


async def test_a_limit_the_replay_did_not_use_up_does_not_end_live_events(
    served: Served,
) -> None:
    head, until, events = await _read_while_more_commit(
        served, 63, lambda head, until: f"since={head - 1}&live=true&limit=3&until_seq={until}"
    )
    eoses = [e[1]["seq"] for e in events if e[0] == "eose"]
    assert eoses == [head, until]  # the replay's, then until_seq's: none between
    assert [e[1]["seq"] for e in events if e[0] == "op"] == list(range(head, until + 1))


async def test_a_limit_used_up_at_until_seq_sends_one_eose(served: Served) -> None:
    await served.relay.ingest(mixed_workload(10, seed=67, now_ms=PAST_MS))
    events = await read_sse(served.url, "since=0&live=true&limit=4&until_seq=4")
    assert [e[0] for e in events] == ["status", "op", "op", "op", "op", "eose"]


async def test_a_live_bootstrap_sends_one_eose_then_live_events(served: Served) -> None:
    head, until, events = await _read_while_more_commit(
        served, 65, lambda head, until: f"mode=bootstrap&live=true&until_seq={until}"
    )
    assert [e[1]["seq"] for e in events if e[0] == "eose"] == [head, until]


async def test_an_sse_client_back_on_a_bootstrap_url_goes_on_as_a_tail(served: Served) -> None:
    """An EventSource reconnects to the URL it opened, with the last id it
    got: on a bootstrap URL that id is past the snapshot, so it tails on."""
    await served.relay.ingest(mixed_workload(10, seed=60, now_ms=PAST_MS))
    head = await served.relay.store.log_length()
    first = await read_sse(served.url, "mode=bootstrap")
    token = first[-1][2]
    assert first[-1][0] == "eose" and token.endswith(f".{head}")
    await served.relay.ingest(mixed_workload(5, seed=61, now_ms=PAST_MS))
    again = await read_sse(served.url, "mode=bootstrap", headers={"Last-Event-ID": token})
    assert again[0][0] == "status" and again[0][1]["mode"] == "tail"
    after = [e[1]["seq"] for e in again if e[0] == "op"]
    assert after == list(range(head + 1, await served.relay.store.log_length() + 1))


async def test_follow_with_until_seq_ends_there_even_live(served: Served) -> None:
    await served.relay.ingest(mixed_workload(10, seed=62, now_ms=PAST_MS))
    options = FollowOptions(live=True, until_seq=5)
    kinds = [event.kind async for event in follow(served.url, since="0", options=options)]
    assert kinds == ["status", "op", "op", "op", "op", "op", "eose"]


async def test_head_answers_the_stream_headers_without_a_body(served: Served) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.head(f"{served.url}/changes?live=true")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["cache-control"] == "no-store" and not answer.content


async def test_a_live_sse_subscriber_that_leaves_is_let_go(served: Served) -> None:
    def open_sse(text: str) -> float:
        found = re.search(r'^dfos_relay_feed_subscribers\{transport="sse"\} (\S+)$', text, re.M)
        assert found
        return float(found.group(1))

    async with httpx.AsyncClient(timeout=10) as http:
        async with aconnect_sse(http, "GET", f"{served.url}/changes?live=true") as source:
            async for sse in source.aiter_sse():
                if sse.event == "eose":  # caught up and following
                    assert open_sse((await http.get(f"{served.url}/metrics")).text) == 1
                    break  # now leave
        for _ in range(50):
            if open_sse((await http.get(f"{served.url}/metrics")).text) == 0:
                return
            await asyncio.sleep(0.1)
    raise AssertionError("the subscription outlived its client")


async def test_follow_refuses_since_with_a_bootstrap() -> None:
    """A bootstrap starts at a snapshot; a since given with it would make a
    retry before the snapshot a tail from there, the snapshot's items lost."""
    events = follow("http://127.0.0.1:9", since="5", options=FollowOptions(mode="bootstrap"))
    with pytest.raises(ValueError, match="bootstrap"):
        await anext(events)
