"""Bounded by design: a subscriber that stops reading is not buffered for
without end. Once the kernel's socket buffers are full, a send that waits
past the send timeout closes the stream and counts in
``dfos_relay_feed_slow_consumers_closed_total``. An SSE consumer resumes
from the last event it received (``Last-Event-ID``) or from the token of the
error event that ends its stream; a WebSocket consumer gets an ERR with its
last delivered token and close code 4008, and resumes from that token.
Either way nothing is lost."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import websockets
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from relay import Relay, create_relay
from relay.config import RelayConfig
from relay.http.sse_stream import SseStream
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS

from .conftest import read_sse, ws_frames_until

SLOW_CLOSED = "dfos_relay_feed_slow_consumers_closed_total"


def _read_sse_until_error(sock: socket.socket, timeout_s: float) -> bytes:
    """What arrives until the stream's error event is read whole, the relay
    closes, or a read times out."""
    sock.settimeout(timeout_s)
    received = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(1 << 16):
            received += chunk
            if re.search(rb"event: error\r?\ndata: .*?\r?\n\r?\n", received[-(1 << 17) :]):
                break
    return received


async def _metric(url: str, pattern: str) -> float:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    match = re.search(rf"^{pattern} ([0-9.e+]+)$", text, re.MULTILINE)
    assert match, pattern
    return float(match.group(1))


async def _until_metric(url: str, pattern: str, value: float) -> None:
    for _ in range(75):
        if await _metric(url, pattern) == value:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{pattern} never reached {value}")


async def _a_large_log(relay: Relay) -> int:
    # ~6 MB of events: more than the kernel buffers of one connection hold
    await relay.ingest(mixed_workload(4500, seed=81, now_ms=PAST_MS))
    return await relay.store.log_length()


def _relay() -> Relay:
    return create_relay(MemoryStore(), config=RelayConfig(feed_send_timeout_s=0.5))


def _stalled_socket(url: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    sock.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    return sock


async def test_an_sse_consumer_that_stops_reading_is_closed_counted_and_resumes() -> None:
    relay = _relay()
    async with serve_on_loopback(relay.app) as url:
        head = await _a_large_log(relay)
        assert await _metric(url, SLOW_CLOSED) == 0
        sock = _stalled_socket(url)
        sock.sendall(b"GET /changes?since=0&live=true HTTP/1.1\r\nHost: relay\r\n\r\n")
        await _until_metric(url, r'dfos_relay_feed_subscribers\{transport="sse"\}', 1)
        await _until_metric(url, r'dfos_relay_feed_subscribers\{transport="sse"\}', 0)
        assert await _metric(url, SLOW_CLOSED) == 1  # closed as too slow, not as gone
        received = await asyncio.to_thread(_read_sse_until_error, sock, 5)
        sock.close()
        ids = re.findall(rb"\nid: ([0-9a-z]+\.[0-9]+)\r?\n", received)
        assert ids, "some events were delivered before the stall"
        last = ids[-1].decode()
        delivered = int(last.split(".")[1])
        assert delivered < head  # it was cut before the end
        # the stream's last event says why it ended and where to resume (as
        # the WebSocket's ERR: the last event whose send had completed)
        final = re.findall(rb"event: error\r?\ndata: (.*?)\r?\n", received)
        assert final, "the cut stream ends with an error event"
        error = json.loads(final[-1])
        assert error["status"] == 408 and error["seq"] <= delivered
        assert error["token"].endswith(f".{error['seq']}")
        resumed = await read_sse(url, "since=0", headers={"Last-Event-ID": error["token"]})
        rest = [e[1]["seq"] for e in resumed if e[0] == "op"]
        assert rest == list(range(error["seq"] + 1, head + 1))


def _ws_open(sock: socket.socket, subscriptions: list[Any]) -> WSConnection:
    """The WebSocket handshake and the CHANGES requests, by hand over a plain
    socket (wsproto frames them), so the test decides when to read."""
    client = WSConnection(ConnectionType.CLIENT)
    sock.sendall(client.send(Request(host="relay", target="/changes")))
    accepted = False
    while not accepted:
        client.receive_data(sock.recv(1 << 16))
        accepted = any(isinstance(e, AcceptConnection) for e in client.events())
    for frame in subscriptions:
        sock.sendall(client.send(TextMessage(data=json.dumps(frame))))
    return client


def _ws_read_until_close(
    sock: socket.socket, client: WSConnection, timeout_s: float
) -> tuple[list[Any], CloseConnection | None]:
    """The messages that arrive until the relay's close frame (it waits for
    the client's own close before it ends the connection), the relay closes,
    or a read times out; and that close frame."""
    sock.settimeout(timeout_s)
    frames: list[Any] = []
    text, close = "", None
    with contextlib.suppress(OSError):
        while close is None and (chunk := sock.recv(1 << 16)):
            client.receive_data(chunk)
            for event in client.events():
                if isinstance(event, TextMessage):
                    text += event.data
                    if event.message_finished:
                        frames.append(json.loads(text))
                        text = ""
                elif isinstance(event, CloseConnection):
                    close = event
    return frames, close


async def test_a_websocket_consumer_that_stops_reading_gets_its_token_and_resumes() -> None:
    relay = _relay()
    async with serve_on_loopback(relay.app) as url:
        head = await _a_large_log(relay)
        sock = _stalled_socket(url)
        subscriptions = [
            ["CHANGES", "live", {"since": 0, "live": True}],
            ["CHANGES", "tail", {"since": head, "live": True}],
        ]
        client = await asyncio.to_thread(_ws_open, sock, subscriptions)
        await _until_metric(url, SLOW_CLOSED, 1)  # it stopped reading: the relay gives up
        frames, close = await asyncio.to_thread(_ws_read_until_close, sock, client, 5)
        sock.close()
        events = [f[3] for f in frames if f[1] == "live" and f[2] == "EVENT"]
        errors = {f[1]: f[3] for f in frames if f[2] == "ERR"}
        assert events == list(range(1, len(events) + 1)), "in order, none missing"
        assert set(errors) == {"live", "tail"}  # every open subscription learns where it stood
        assert errors["tail"]["seq"] == head and errors["tail"]["code"] == 4008
        err = errors["live"]
        token, seq = err["token"], err["seq"]
        assert err["code"] == 4008 and token.endswith(f".{seq}")
        assert close is not None and close.code == 4008 and token in (close.reason or "")
        assert seq < head  # it was cut before the end
        # the token is the last completed send; the frame being sent when the
        # timeout struck may still have reached the client, nothing beyond it
        assert len(events) - 1 <= seq <= len(events)
        ws_url = "ws" + url.removeprefix("http") + "/changes"
        async with websockets.connect(ws_url) as again:
            await again.send(json.dumps(["CHANGES", "resume", {"since": token}]))
            resumed = await ws_frames_until(again, "resume", "EOSE")
        rest = [f[3] for f in resumed if f[2] == "EVENT"]
        assert rest == list(range(seq + 1, head + 1))


async def test_a_stalled_sse_stream_whose_client_leaves_meanwhile_ends_quietly() -> None:
    """The stream was cut and its last event is being sent when the client
    goes: that is an end like any other, not an error out of the response."""
    left, final_queued = asyncio.Event(), asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        while True:
            yield b"data: x\n\n"

    async def receive() -> dict[str, str]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if not message.get("more_body", False):
                final_queued.set()
            await asyncio.Event().wait()  # the socket never drains

    stream = SseStream(chunks(), 0.2, lambda: b"event: error\ndata: {}\n\n")
    task = asyncio.create_task(stream({"type": "http", "method": "GET"}, receive, send))
    await asyncio.wait_for(final_queued.wait(), 10)
    left.set()
    await asyncio.wait_for(task, 10)  # returns; no CancelledError escapes


def _flood_until_blocked(sock: socket.socket, client: WSConnection) -> None:
    """Bad requests, each answered with an ERR, sent until the relay stops reading."""
    bad = json.dumps(["CHANGES", "bad", {"since": "x" * 80}])  # its ERR quotes the since
    sock.settimeout(1)
    with contextlib.suppress(OSError):
        while True:
            sock.sendall(client.send(TextMessage(data=bad)))


async def test_a_websocket_consumer_stalled_on_another_frame_gets_its_tokens_too() -> None:
    """Whichever frame the stall struck (here the ERR of a bad request, with
    nothing of the open subscription's own to send), every open subscription
    gets its ERR and the socket closes with 4008, not as a normal end."""
    relay = _relay()
    async with serve_on_loopback(relay.app) as url:
        head = await relay.store.log_length()
        sock = _stalled_socket(url)
        client = await asyncio.to_thread(
            _ws_open, sock, [["CHANGES", "live", {"since": head, "live": True}]]
        )
        await asyncio.to_thread(_flood_until_blocked, sock, client)
        await _until_metric(url, SLOW_CLOSED, 1)
        frames, close = await asyncio.to_thread(_ws_read_until_close, sock, client, 5)
        sock.close()
        errors = {f[1]: f[3] for f in frames if f[2] == "ERR" and f[3].get("code") == 4008}
        assert set(errors) == {"live"}  # the open one; "bad" was never open
        assert errors["live"]["seq"] == head and errors["live"]["token"].endswith(f".{head}")
        assert close is not None and close.code == 4008
