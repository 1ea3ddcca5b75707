"""Changes-feed benchmark (issue 13). Not a test; CI does not run it::

    .venv/bin/python bench/feed.py [--ops 10000] [--subscribers 200] [--batch 100]

One relay (memory store) is served by hypercorn on loopback; the subscribers
are real SSE clients (httpx + httpx-sse) in this process, each following the
feed live. Then ``--ops`` ops are posted in batches of ``--batch``:

1. commit-to-receipt latency: for every op, the time from its POST answer
   (the commit) to its arrival at each subscriber; p50 and p99 over all;
2. the ingest rate with the subscribers, as a ratio of the rate of a fresh
   relay without any (target >= 0.8), measured in the same run;
3. relay RSS per subscriber: (RSS with N idle subscribers - RSS with none)
   / N, read from /proc of this process after the relay's own baseline
   (target <= 64 KiB; the subscribers' client side is measured apart);
4. with ``--sweep``, the largest subscriber count this machine sustains with
   p99 <= 1 s, doubling from 50.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

import httpx
from httpx_sse import aconnect_sse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relay import create_relay
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def ingest_rate(tokens: list[str], batch: int) -> float:
    relay = create_relay(MemoryStore())
    async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(timeout=60) as http:
        start = time.perf_counter()
        for i in range(0, len(tokens), batch):
            await http.post(f"{url}/operations", json={"operations": tokens[i : i + batch]})
        return len(tokens) / (time.perf_counter() - start)


async def with_subscribers(
    tokens: list[str], batch: int, n: int
) -> tuple[float, list[float], float]:
    """(ingest rate, latencies in s, relay RSS KiB per idle subscriber)."""
    relay = create_relay(MemoryStore())
    arrived: dict[str, list[float]] = {}
    ready = 0
    all_ready = asyncio.Event()
    async with serve_on_loopback(relay.app) as url:
        gc.collect()
        before = rss_kib()
        limits = httpx.Limits(max_connections=n + 10)
        async with httpx.AsyncClient(timeout=None, limits=limits) as sub_http:

            async def subscriber() -> None:
                nonlocal ready
                params = {"live": "true", "since": str(await relay.store.log_length())}
                async with aconnect_sse(sub_http, "GET", f"{url}/changes", params=params) as es:
                    async for sse in es.aiter_sse():
                        if sse.event == "eose":
                            ready += 1
                            if ready == n:
                                all_ready.set()
                        elif sse.event == "op":
                            cid = sse.data.split('"cid": "', 1)[1].split('"', 1)[0]
                            arrived.setdefault(cid, []).append(time.perf_counter())

            tasks = [asyncio.create_task(subscriber()) for _ in range(n)]
            await asyncio.wait_for(all_ready.wait(), 120)
            gc.collect()
            per_sub = max(0, rss_kib() - before) / max(n, 1)
            committed: dict[str, float] = {}
            async with httpx.AsyncClient(timeout=120) as http:
                start = time.perf_counter()
                for i in range(0, len(tokens), batch):
                    answer = await http.post(
                        f"{url}/operations", json={"operations": tokens[i : i + batch]}
                    )
                    now = time.perf_counter()
                    for result in answer.json()["results"]:
                        committed[result["cid"]] = now
                rate = len(tokens) / (time.perf_counter() - start)
            deadline = time.perf_counter() + 120
            while time.perf_counter() < deadline and any(
                len(arrived.get(c, ())) < n for c in committed
            ):
                await asyncio.sleep(0.1)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    latencies = [t - committed[c] for c, times in arrived.items() if c in committed for t in times]
    return rate, latencies, per_sub


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--subscribers", type=int, default=200)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    tokens = mixed_workload(args.ops, seed=1)
    print(f"{len(tokens)} ops in batches of {args.batch}")
    alone = await ingest_rate(tokens, args.batch)
    rate, lat, per_sub = await with_subscribers(tokens, args.batch, args.subscribers)
    ratio = rate / alone
    print(f"ingest alone: {alone:,.0f} ops/s; with {args.subscribers} SSE subscribers: "
          f"{rate:,.0f} ops/s; ratio {ratio:.2f} (target >= 0.8: "
          f"{'met' if ratio >= 0.8 else 'MISSED'})")  # fmt: skip
    print(f"commit-to-receipt latency over {len(lat):,} deliveries: "
          f"p50 {pct(lat, 50) * 1000:.0f} ms, p99 {pct(lat, 99) * 1000:.0f} ms")  # fmt: skip
    print(f"relay RSS per idle subscriber (with this process's clients): {per_sub:.1f} KiB "
          f"(target <= 64: {'met' if per_sub <= 64 else 'MISSED'})")  # fmt: skip
    if args.sweep:
        n, best = 50, 0
        while n <= 3200:
            _, lat, _ = await with_subscribers(tokens[:2000], args.batch, n)
            p99 = pct(lat, 99)
            print(f"  {n} subscribers: p99 {p99 * 1000:.0f} ms")
            if p99 > 1.0:
                break
            best, n = n, n * 2
        print(f"sustained with p99 <= 1 s: {best} subscribers on this machine")


if __name__ == "__main__":
    asyncio.run(main())
