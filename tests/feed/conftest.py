"""Relays with a changes feed, served by a real hypercorn on loopback, over
every store backend; and small readers of the feed's two transports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import websockets

from relay import Relay, create_relay
from relay.config import RelayConfig
from relay.testing.server import serve_on_loopback
from stores.base import RelayStore


@dataclass
class Served:
    relay: Relay
    url: str

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/changes"


@pytest.fixture
async def served(store: RelayStore) -> AsyncIterator[Served]:
    relay = create_relay(store, config=RelayConfig(feed_heartbeat_s=1.0, feed_send_timeout_s=5.0))
    async with serve_on_loopback(relay.app) as url:
        yield Served(relay, url)


async def read_sse(
    url: str, query: str, headers: dict[str, str] | None = None
) -> list[tuple[str, Any, str]]:
    """Every (event, data, id) of a stream that ends (not live)."""
    out: list[tuple[str, Any, str]] = []
    async with httpx.AsyncClient(timeout=30) as http:
        from httpx_sse import aconnect_sse

        async with aconnect_sse(
            http, "GET", f"{url}/changes?{query}", headers=dict(headers or {})
        ) as source:
            assert source.response.status_code == 200, await source.response.aread()
            async for sse in source.aiter_sse():
                out.append((sse.event, json.loads(sse.data) if sse.data else None, sse.id))
    return out


async def ws_frames_until(
    ws: websockets.ClientConnection,
    sub_id: str,
    verb: str,
    others: dict[str, list[Any]] | None = None,
) -> list[Any]:
    """Frames of ``sub_id`` up to and including the first with ``verb`` (or
    ERR); frames of other subscriptions go to ``others``."""
    frames: list[Any] = []
    backlog = others if others is not None else {}
    if sub_id in backlog:
        for i, frame in enumerate(backlog[sub_id]):
            frames.append(frame)
            if frame[2] in (verb, "ERR"):
                backlog[sub_id] = backlog[sub_id][i + 1 :]
                return frames
        backlog[sub_id] = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if frame[1] != sub_id:
            backlog.setdefault(frame[1], []).append(frame)
            continue
        frames.append(frame)
        if frame[2] in (verb, "ERR"):
            return frames


# the isolated Postgres schema fixture of the command-line tests
from tests.cli.conftest import postgres_schema_url  # noqa: E402, F401
