"""A WebSocket client that answers no ping is closed, and its subscriber
slots are freed: the subscriber cap bounds subscribers, so a client that
stays connected but stopped reading (or is gone without a FIN) must not
hold a quiet subscription for good.

Once nothing, not even a pong, has come from the client for
``UNANSWERED_PINGS`` ping intervals, each open subscription gets an ERR
4008 with its last delivered token (queued behind what it has not read),
the socket closes with 4008, and
``dfos_relay_feed_pings_unanswered_closed_total`` counts it. A client that
answers the pings stays connected however quiet its subscription is. Both
ways of serving the relay check it: ``dfos-relay serve`` (pings at the
feed heartbeat) and ``hypercorn relay.asgi:app --websocket-ping-interval``."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from relay import create_relay
from relay.config import RelayConfig
from relay.http.changes_ws import UNANSWERED_PINGS
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore
from tests.cli.conftest import RelayProcess as ServeProcess
from tests.support.relay_process import RelayProcess as HypercornProcess

PING_S = 0.3  # the silent client is closed about a second after it went quiet
UNANSWERED = "dfos_relay_feed_pings_unanswered_closed_total"
WS_SUBSCRIBERS = 'dfos_relay_feed_subscribers{transport="websocket"}'


class SilentClient:
    """A WebSocket client by hand (wsproto): it subscribes, reads up to the
    subscription's EOSE, then neither reads nor answers anything."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.sock.sendall(self.ws.send(Request(host="relay", target="/changes")))
        while not any(isinstance(e, AcceptConnection) for e in self.ws.events()):
            self.ws.receive_data(self.sock.recv(1 << 16))
        self.partial = ""

    def _received(self, data: bytes) -> list[Any]:
        """The frames (parsed) and close events that ``data`` completes."""
        self.ws.receive_data(data)
        out: list[Any] = []
        for event in self.ws.events():
            if isinstance(event, TextMessage):
                self.partial += event.data
                if event.message_finished:
                    out.append(json.loads(self.partial))
                    self.partial = ""
            elif isinstance(event, CloseConnection):
                out.append(event)
        return out

    def subscribe(self, sub_id: str) -> str:
        """The token of the subscription's EOSE (its last delivered event)."""
        request = json.dumps(["CHANGES", sub_id, {"live": True}])
        self.sock.sendall(self.ws.send(TextMessage(data=request)))
        self.sock.settimeout(10)
        while True:
            for frame in self._received(self.sock.recv(1 << 16)):
                if isinstance(frame, list) and frame[2] == "EOSE":
                    return str(frame[4])

    def read_to_the_end(self) -> tuple[list[Any], CloseConnection | None, bool]:
        """What the relay sent since (its frames, its close) and whether it
        then hung up (EOF)."""
        frames: list[Any] = []
        close = None
        self.sock.settimeout(10)
        with suppress(OSError):
            while data := self.sock.recv(1 << 16):
                for frame in self._received(data):
                    if isinstance(frame, CloseConnection):
                        close = frame
                    else:
                        frames.append(frame)
            return frames, close, True
        return frames, close, False


async def _metric(url: str, name: str) -> float:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    assert match, name
    return float(match.group(1))


async def _until_metric(url: str, name: str, value: float) -> None:
    for _ in range(50):
        if await _metric(url, name) == value:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never reached {value}")


async def _first_answer(ws_url: str, sub_id: str) -> list[Any]:
    """The first frame a new subscription gets (STATUS, or ERR when refused)."""
    async with websockets.connect(ws_url, ping_interval=None) as ws:
        await ws.send(json.dumps(["CHANGES", sub_id, {"live": True}]))
        return list(json.loads(await asyncio.wait_for(ws.recv(), 10)))


async def _until_subscribed(ws_url: str) -> float:
    """Retry a new subscription until the relay has a slot for it: seconds taken."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while (answer := await _first_answer(ws_url, "next"))[2] == "ERR":
        assert answer[3]["status"] == 503, answer  # busy: the silent client holds the slot
        assert loop.time() - start < 10, "the silent client kept its slot"
        await asyncio.sleep(0.1)
    return loop.time() - start


@asynccontextmanager
async def _served(launcher: str, config_dir: Path) -> AsyncIterator[str]:
    """A relay process on a memory store with one subscriber slot, pinging
    every ``PING_S``, started by ``launcher``: its base URL."""
    if launcher == "dfos-relay serve":
        args = ["--store", "memory://", "--feed-heartbeat", str(PING_S), "--log-level", "warning"]
        served = ServeProcess(args, env={"DFOS_RELAY_FEED_MAX_SUBSCRIBERS": "1"})
        try:
            yield served.url
        finally:
            served.stop()
        return
    # hypercorn's --websocket-ping-interval takes whole seconds; its config file does not
    config = config_dir / "hypercorn.toml"
    config.write_text(f"websocket_ping_interval = {PING_S}\n")
    hypercorn = HypercornProcess(
        "memory://",
        settings={"DFOS_RELAY_FEED_MAX_SUBSCRIBERS": "1"},
        hypercorn_args=["--config", str(config)],
    )
    await hypercorn.start()
    try:
        yield hypercorn.url
    finally:
        hypercorn.stop()


@pytest.mark.parametrize("launcher", ["dfos-relay serve", "hypercorn relay.asgi:app"])
async def test_a_client_that_answers_no_ping_loses_its_socket_and_slot(
    launcher: str, tmp_path: Path
) -> None:
    async with _served(launcher, tmp_path) as url:
        ws_url = "ws" + url.removeprefix("http") + "/changes"
        port = int(url.rsplit(":", 1)[1])
        silent = await asyncio.to_thread(SilentClient, port)
        token = await asyncio.to_thread(silent.subscribe, "quiet")
        assert (await _first_answer(ws_url, "next"))[3]["status"] == 503  # the one slot is taken

        waited = await _until_subscribed(ws_url)
        assert waited < (UNANSWERED_PINGS + 2) * PING_S + 2  # closed soon after the limit
        frames, close, hung_up = await asyncio.to_thread(silent.read_to_the_end)
        # it learns where to resume, once it reads again
        errors = [f for f in frames if f[:3] == ["CHANGES", "quiet", "ERR"]]
        assert len(errors) == 1 and errors[0][3]["code"] == 4008, frames
        assert errors[0][3]["token"] == token and "pong" in errors[0][3]["error"]
        assert close is not None and close.code == 4008 and token in (close.reason or "")
        assert hung_up
        assert await _metric(url, UNANSWERED) == 1
        await _until_metric(url, WS_SUBSCRIBERS, 0)  # the retries' sockets are gone too


async def test_a_client_that_answers_the_pings_stays_connected() -> None:
    relay = create_relay(MemoryStore(), config=RelayConfig(feed_max_subscribers=1))
    async with serve_on_loopback(relay.app, ping_interval_s=PING_S) as url:
        ws_url = "ws" + url.removeprefix("http") + "/changes"
        # pongs only: its own pings would also count as hearing from it
        async with websockets.connect(ws_url, ping_interval=None) as ws:
            await ws.send(json.dumps(["CHANGES", "quiet", {"live": True}]))
            while json.loads(await asyncio.wait_for(ws.recv(), 10))[2] != "EOSE":
                pass
            with pytest.raises(TimeoutError):  # a quiet subscription: nothing to read
                await asyncio.wait_for(ws.recv(), 4 * UNANSWERED_PINGS * PING_S)
            assert await _metric(url, UNANSWERED) == 0
            assert await _metric(url, WS_SUBSCRIBERS) == 1
            await ws.send(json.dumps(["CLOSE", "quiet"]))  # still both ways open
            await ws.send(json.dumps(["CHANGES", "again", {}]))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))[:3] == [
                "CHANGES",
                "again",
                "STATUS",
            ]


async def test_without_pings_a_quiet_client_is_not_judged() -> None:
    """Served without a ping interval, silence is all a client owes: it keeps its socket."""
    relay = create_relay(MemoryStore())
    async with serve_on_loopback(relay.app) as url:
        silent = await asyncio.to_thread(SilentClient, int(url.rsplit(":", 1)[1]))
        await asyncio.to_thread(silent.subscribe, "quiet")
        await asyncio.sleep(4 * UNANSWERED_PINGS * PING_S)
        assert await _metric(url, WS_SUBSCRIBERS) == 1
        assert await _metric(url, UNANSWERED) == 0
        silent.sock.close()
