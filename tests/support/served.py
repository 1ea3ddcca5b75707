"""A relay with a settable clock and config, reached either in-process
(httpx over ASGI) or through a real hypercorn server on loopback: tests of
the additive routes run over both transports, on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from relay import Relay, RelayConfig, create_relay
from relay.testing.server import serve_on_loopback
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

TRANSPORTS = ("asgi", "hypercorn")
DAY_MS = 86_400_000
START_MS = PAST_MS + 30 * DAY_MS  # well after the workloads' createdAt


@dataclass
class Clock:
    now_ms: int = START_MS

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@dataclass
class Served:
    relay: Relay
    client: httpx.AsyncClient
    clock: Clock


@asynccontextmanager
async def served_relay(
    store: RelayStore,
    transport: str,
    config: RelayConfig | None = None,
    start_ms: int = START_MS,
) -> AsyncIterator[Served]:
    clock = Clock(start_ms)
    relay = create_relay(store, config=config, clock=clock)
    if transport == "hypercorn":
        async with (
            serve_on_loopback(relay.app) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            yield Served(relay, client, clock)
        return
    async with (
        relay.running(),
        asgi_client(relay.app) as client,
    ):
        yield Served(relay, client, clock)
