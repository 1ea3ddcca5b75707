"""WEB-RELAY.md "Future timestamp guard": identity and content ops more than
24 hours ahead of the relay clock are rejected, beacons more than 5 minutes
ahead; the rejection is not permanent (the same token passes later)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from relay import create_relay
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, post, statuses

HOUR_MS = 3600 * 1000
MINUTE_MS = 60 * 1000
NOW_MS = PAST_MS + 1000 * HOUR_MS


@dataclass
class Clock:
    now_ms: int

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
async def clocked(store: RelayStore) -> AsyncIterator[tuple[httpx.AsyncClient, Clock]]:
    clock = Clock(NOW_MS)
    relay = create_relay(store, clock=clock)
    async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
        yield client, clock


def _builder_at(ms: int, seed: int) -> WorkloadBuilder:
    # tick() adds step_ms before the first op, so start one step early.
    return WorkloadBuilder(seed=seed, start_ms=ms - 1000, step_ms=1000)


@pytest.mark.parametrize(
    ("ahead_ms", "status"),
    [(24 * HOUR_MS - 1000, "new"), (24 * HOUR_MS, "new"), (24 * HOUR_MS + 1000, "rejected")],
)
async def test_identity_genesis_guard_is_24h(clocked, ahead_ms: int, status: str) -> None:  # type: ignore[no-untyped-def]
    client, _ = clocked
    b = _builder_at(NOW_MS + ahead_ms, seed=51)
    b.identity()
    [result] = await post(client, b.tokens)
    assert result["status"] == status


async def test_content_op_guard_is_24h(clocked) -> None:  # type: ignore[no-untyped-def]
    client, _ = clocked
    b = WorkloadBuilder(seed=52, start_ms=NOW_MS - HOUR_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain, created_ms=NOW_MS + 24 * HOUR_MS + 1000)
    results = await post(client, b.tokens)
    assert statuses(results) == ["new", "new", "rejected"]
    assert "future" in results[2]["error"]


def _at(b: WorkloadBuilder, ms: int) -> None:
    """Make the builder's next op carry createdAt = ``ms``."""
    b._now = ms - b.step_ms


@pytest.mark.parametrize(
    ("ahead_ms", "status"),
    [(5 * MINUTE_MS - 1000, "new"), (5 * MINUTE_MS + 1000, "rejected"), (HOUR_MS, "rejected")],
)
async def test_beacon_guard_is_5_minutes(clocked, ahead_ms: int, status: str) -> None:  # type: ignore[no-untyped-def]
    client, _ = clocked
    b = WorkloadBuilder(seed=53, start_ms=NOW_MS - HOUR_MS)
    alice = b.identity()
    _at(b, NOW_MS + ahead_ms)
    b.beacon(alice)
    results = await post(client, b.tokens)
    assert statuses(results) == ["new", status]


async def test_future_rejection_is_not_permanent(clocked) -> None:  # type: ignore[no-untyped-def]
    client, clock = clocked
    b = WorkloadBuilder(seed=54, start_ms=NOW_MS - HOUR_MS)
    alice = b.identity()
    _at(b, NOW_MS + 10 * MINUTE_MS)
    b.beacon(alice)
    chain = b.content_create(alice)
    b.content_update(chain, created_ms=NOW_MS + 25 * HOUR_MS)
    assert statuses(await post(client, b.tokens)) == ["new", "rejected", "new", "rejected"]
    clock.now_ms += 2 * HOUR_MS
    assert statuses(await post(client, b.tokens)) == ["duplicate", "new", "duplicate", "new"]
