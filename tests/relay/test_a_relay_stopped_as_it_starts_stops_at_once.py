"""A relay stopped at once after it starts stops at once. The policy retry
task looks for kept ops at start (its wake-up event is set then); on
Python 3.11 ``asyncio.wait_for`` over an event already set swallows the
cancel that stops it, and the relay's stop then waited for ever (a dump
test hung 300 s, and relays stopped in quick tests waited)."""

from __future__ import annotations

import asyncio
import time

from relay import Relay, create_relay
from stores.memory import MemoryStore

STOPS_WITHIN_S = 2.0  # with room for a busy host; it waited 1 s to for ever before


async def start_and_stop(relay: Relay) -> None:
    async with relay.running():
        await asyncio.sleep(0)  # the relay's tasks take their first step


async def test_a_relay_stopped_right_after_it_starts_stops_at_once() -> None:
    for _ in range(3):
        started = time.monotonic()
        await start_and_stop(create_relay(MemoryStore()))
        assert time.monotonic() - started < STOPS_WITHIN_S


async def test_two_relays_nested_stop_at_once() -> None:
    first, other = create_relay(MemoryStore()), create_relay(MemoryStore())

    async def both() -> None:
        async with first.running(), other.running():
            await asyncio.sleep(0)  # the relays' tasks take their first step

    started = time.monotonic()
    await both()
    assert time.monotonic() - started < STOPS_WITHIN_S
