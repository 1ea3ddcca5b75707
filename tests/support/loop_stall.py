"""How long the event loop stalls while one request is served: a 1 ms ticker
records the gaps between its wake-ups, and a client asks ``GET /healthz``
over and over, recording how long each answer took. ``longest_stall``: the
most CPU time the loop spent between two turns, which a busy machine does
not inflate as it does wall time."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

import httpx

T = TypeVar("T")


@dataclass
class Stalls:
    gaps: list[float] = field(default_factory=list)  # s between the ticker's wake-ups
    answered: list[float] = field(default_factory=list)  # s per /healthz answer

    @property
    def longest(self) -> float:
        return max([*self.gaps, *self.answered])


async def while_measuring_stalls(client: httpx.AsyncClient, work: Awaitable[T]) -> tuple[T, Stalls]:
    """``work``'s result, and the loop's stalls while it ran."""
    stalls = Stalls()

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stalls.gaps.append(now - last)
            last = now

    async def ask() -> None:
        while True:
            sent = time.perf_counter()
            assert (await client.get("/healthz")).status_code == 200
            stalls.answered.append(time.perf_counter() - sent)
            await asyncio.sleep(0.005)

    background = [asyncio.create_task(tick()), asyncio.create_task(ask())]
    try:
        result = await work
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
    return result, stalls


async def longest_stall(work: Awaitable[T]) -> tuple[T, float]:
    """``work``'s result, and the most CPU the loop spent between two turns
    of a ticker (the last up to the end of ``work``, which may never yield)."""
    gaps: list[float] = []
    last = [0.0]

    async def tick() -> None:
        while True:
            await asyncio.sleep(0)
            now = time.thread_time()
            gaps.append(now - last[0])
            last[0] = now

    gc.collect()
    gc.disable()  # the collector's full passes, set off by any allocation, are not counted
    last[0] = time.thread_time()
    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        result = await work
        gaps.append(time.thread_time() - last[0])
        return result, max(gaps)
    finally:
        gc.enable()
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
