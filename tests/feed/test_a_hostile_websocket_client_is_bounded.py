"""A hostile peer or subscriber is bounded (time, bytes, rounds, memory) and
cut off, never able to stall the relay: over the changes feed's WebSocket.

A socket that holds no subscription is closed after the idle timeout."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from relay import create_relay
from relay.http import changes_ws
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore


async def test_a_socket_without_a_subscription_is_closed_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(changes_ws, "IDLE_TIMEOUT_S", 0.5, raising=False)
    relay = create_relay(MemoryStore())
    async with serve_on_loopback(relay.app) as url:
        ws_url = "ws" + url.removeprefix("http") + "/changes"
        async with websockets.connect(ws_url) as idle:
            with pytest.raises(websockets.ConnectionClosedOK) as closed:
                await asyncio.wait_for(idle.recv(), 10)
        assert closed.value.rcvd is not None and "no subscription" in closed.value.rcvd.reason
        async with websockets.connect(ws_url) as ws:
            # a bad request does not count as a subscription; a live one does
            await ws.send(json.dumps(["CHANGES", "bad", {"mode": "nope"}]))
            await ws.send(json.dumps(["CHANGES", "live", {"live": True}]))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))[2] == "ERR"
            while json.loads(await asyncio.wait_for(ws.recv(), 10))[2] != "EOSE":
                pass
            await asyncio.sleep(1.5)  # three idle timeouts: it stays open while subscribed
            await ws.send(json.dumps(["CLOSE", "live"]))
            with pytest.raises(websockets.ConnectionClosedOK):
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
