"""How long the event loop stalls while one request is served: a 1 ms ticker
records the gaps between its wake-ups, and a client asks ``GET /healthz``
over and over, recording how long each answer took."""

from __future__ import annotations

import asyncio
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
