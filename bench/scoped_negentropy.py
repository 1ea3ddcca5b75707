"""Scoped reconciliation under ingest: what serving ``POST
/sync/negentropy?scope=`` for one large scope costs the rest of the relay
while the log head keeps moving. Not a test; CI does not run it::

    .venv/bin/python -m bench.scoped_negentropy [--artifacts 20000]
                                                [--backends memory,postgres]

Per backend: one DID with ``--artifacts`` artifacts, then a small ingest
(one op per batch) runs all along while scoped rounds are asked for, first
one at a time (CPU per request: the head moved since the last one), then
``--at-once`` at the same time. Reported: the longest gap of a 1 ms ticker
(the loop's longest stall), the slowest and median ``GET /log?limit=1``
and ``POST /operations`` meanwhile, and CPU seconds per scoped request.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable
from typing import TypeVar

import httpx

from bench.common import bench_store
from relay import create_relay
from relay.testing.workload import WorkloadBuilder
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

T = TypeVar("T")
OCTET = {"content-type": "application/octet-stream"}
QUERY = b"\x61\x00\x00\x00"  # a round over everything: the set is built, the answer short


def workload(artifacts: int, extra: int) -> tuple[list[str], list[str], list[str]]:
    """(the large DID then 8 small ones, their ops, ops of another DID)"""
    b = WorkloadBuilder(seed=7, start_ms=PAST_MS)
    owner = b.identity()
    for _ in range(artifacts):
        b.artifact(owner)
    dids = [owner.did, *(b.identity().did for _ in range(8))]
    scoped = list(b.tokens)
    b.tokens.clear()
    other = b.identity()
    for _ in range(extra):
        b.artifact(other)
    return dids, scoped, list(b.tokens)


class Meter:
    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.log: list[float] = []
        self.posts: list[float] = []


async def measured(
    http: httpx.AsyncClient, extra: list[str], work: Awaitable[T]
) -> tuple[T, Meter]:
    meter = Meter()
    last = [time.perf_counter()]

    async def tick() -> None:
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            meter.gaps.append(now - last[0])
            last[0] = now

    async def read_log() -> None:
        while True:
            sent = time.perf_counter()
            assert (await http.get("/log", params={"limit": 1})).status_code == 200
            meter.log.append(time.perf_counter() - sent)
            await asyncio.sleep(0.01)

    async def ingest() -> None:
        while extra:
            sent = time.perf_counter()
            response = await http.post("/operations", json={"operations": [extra.pop(0)]})
            assert response.status_code == 200
            meter.posts.append(time.perf_counter() - sent)
            await asyncio.sleep(0.005)

    background = [asyncio.create_task(f()) for f in (tick, read_log, ingest)]
    try:
        result = await work
        meter.gaps.append(time.perf_counter() - last[0])  # work that never yielded
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
    return result, meter


def show(label: str, meter: Meter, cpu_per_request: float | None = None) -> None:
    def ms(values: list[float], f: object = max) -> str:
        return f"{1000 * f(values):.0f}" if values else "-"  # type: ignore[operator]

    cpu = "" if cpu_per_request is None else f"  cpu/request {1000 * cpu_per_request:.0f} ms"
    print(
        f"  {label:<28} stall max {ms(meter.gaps)} ms"
        f"  GET /log max {ms(meter.log)} (median {ms(meter.log, statistics.median)}) ms"
        f"  POST /operations max {ms(meter.posts)} (median {ms(meter.posts, statistics.median)})"
        f" ms{cpu}"
    )


async def run(backend: str, artifacts: int, sequential: int, at_once: int) -> None:
    dids, scoped, extra = workload(artifacts, 600)
    did = dids[0]
    async with bench_store(backend) as store:
        relay = create_relay(store)
        async with relay.running(), asgi_client(relay.app) as http:
            for i in range(0, len(scoped), 200):
                await relay.ingest(scoped[i : i + 200])
            print(f"{backend}: one DID with {artifacts} artifacts (log {await store.log_length()})")

            async def ask(scope: str = did) -> int:
                response = await http.post(
                    "/sync/negentropy", params={"scope": scope}, content=QUERY, headers=OCTET,
                    timeout=120,
                )  # fmt: skip
                return response.status_code

            async def cold() -> float:
                started = time.process_time()
                assert await ask() == 200
                return time.process_time() - started

            cpu, meter = await measured(http, extra, cold())
            show("first (a full build)", meter, cpu)

            async def one_by_one() -> float:
                cpu = 0.0
                for _ in range(sequential):
                    await asyncio.sleep(0.03)  # the head moves meanwhile
                    started = time.process_time()
                    assert await ask() == 200
                    cpu += time.process_time() - started
                return cpu / sequential

            cpu, meter = await measured(http, extra, one_by_one())
            show(f"{sequential} one at a time", meter, cpu)

            async def together() -> list[int]:
                return await asyncio.gather(*(ask() for _ in range(at_once)))

            statuses, meter = await measured(http, extra, together())
            show(f"{at_once} at once {sorted(set(statuses))}", meter)

            async def distinct() -> list[int]:
                # each scope names the large DID and one more: a set of its own
                scopes = [f"{did},{other}" for other in dids[1 : at_once + 1]]
                return await asyncio.gather(*(ask(scope) for scope in scopes))

            statuses, meter = await measured(http, extra, distinct())
            codes = {c: statuses.count(c) for c in sorted(set(statuses))}
            show(f"{len(statuses)} scopes at once {codes}", meter)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--artifacts", type=int, default=20_000)
    parser.add_argument("--sequential", type=int, default=10)
    parser.add_argument("--at-once", type=int, default=8)
    parser.add_argument("--backends", default="memory,postgres")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        await run(backend, args.artifacts, args.sequential, args.at_once)


if __name__ == "__main__":
    asyncio.run(main())
