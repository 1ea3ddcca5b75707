"""Memory of concurrent changes-feed bootstraps over long chains. Not a
test; CI does not run it::

    .venv/bin/python -m bench.feed_bootstrap_memory [--ops 10000] [--subscribers 20]
        [--backends memory,sqlite,postgres] [--modes unscoped,scoped]

The store holds one identity chain of ``--ops`` ops (key rotations) and one
content chain of ``--ops`` updates with a one-op fork from its middle (the
workload of ``bench.chain_reads``). ``--subscribers`` bootstraps run at once
in-process (``Feed.open`` + ``Subscription.messages``, the path both
transports take), unscoped and scoped to the two chains. Printed per store
and mode: the Python heap's peak above its level before the bootstraps
(tracemalloc, every thread), the process's peak RSS above its RSS before
them (VmHWM, reset through /proc/self/clear_refs), and the wall time.

A bootstrap's SNAPSHOT of a chain needs only its tips; one that read the
whole chain to find them held chain length x subscribers op rows at once
on a store whose reads suspend (SQLite, Postgres).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import tracemalloc
from pathlib import Path

from bench.chain_reads import BATCH, workload
from bench.common import bench_store
from relay import create_relay
from relay.feed.filters import build_filter
from relay.feed.messages import Snapshot

_STATUS = Path("/proc/self/status")


def _kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


async def _bootstraps(relay: object, fields: dict[str, str], n: int) -> list[int]:
    feed = relay.feed  # type: ignore[attr-defined]

    async def one() -> int:
        sub = await feed.open(build_filter(fields), "sse", "bench")
        with sub:
            return sum([isinstance(m, Snapshot) async for m in sub.messages()])

    return await asyncio.gather(*(one() for _ in range(n)))


async def run(n_ops: int, subscribers: int, backends: list[str], only: list[str]) -> None:
    started = time.perf_counter()
    tokens, ids = workload(n_ops)
    print(f"workload: {len(tokens)} ops in {time.perf_counter() - started:.0f}s")
    modes = {
        "unscoped": {"mode": "bootstrap"},
        "scoped": {"mode": "bootstrap", "scope": f"{ids['did']},{ids['content']}"},
    }
    warm = modes["unscoped"]
    modes = {mode: fields for mode, fields in modes.items() if mode in only}
    for backend in backends:
        async with bench_store(backend) as store:
            relay = create_relay(store)
            async with relay.running():
                for i in range(0, len(tokens), BATCH):
                    await relay.ingest(tokens[i : i + BATCH])
                await _bootstraps(relay, warm, 1)  # warm caches and pools
                for mode, fields in modes.items():
                    gc.collect()
                    tracemalloc.start()
                    base = tracemalloc.get_traced_memory()[0]
                    _reset_peak_rss()
                    rss0 = _kib("VmRSS")
                    t = time.perf_counter()
                    counts = await _bootstraps(relay, fields, subscribers)
                    wall = time.perf_counter() - t
                    peak = tracemalloc.get_traced_memory()[1] - base
                    tracemalloc.stop()
                    rss = _kib("VmHWM") - rss0
                    print(
                        f"{backend:8} {mode:8} {subscribers} bootstraps x {counts[0]} items: "
                        f"heap peak +{peak / 2**20:7.1f} MiB  RSS peak +{rss / 1024:7.1f} MiB  "
                        f"{wall:6.2f} s"
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--subscribers", type=int, default=20)
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--modes", default="unscoped,scoped")
    args = parser.parse_args()
    asyncio.run(run(args.ops, args.subscribers, args.backends.split(","), args.modes.split(",")))


if __name__ == "__main__":
    main()
