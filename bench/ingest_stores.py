"""Ingest benchmark: the same signed mixed workload through ``Relay.ingest``
(in-process, batches of 100) on memory, SQLite and Postgres.

Prints each rate and its ratio to the memory-store rate of the same run
(targets: SQLite >= 0.6, Postgres >= 0.5).

    .venv/bin/python -m bench.ingest_stores --ops 10000
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.common import bench_store, cached_workload
from relay import create_relay

TARGETS = {"sqlite": 0.6, "postgres": 0.5}


async def ingest_rate(backend: str, tokens: list[str], batch: int) -> float:
    async with bench_store(backend) as store:
        relay = create_relay(store)
        async with relay.running():
            started = time.perf_counter()
            for i in range(0, len(tokens), batch):
                results = await relay.ingest(tokens[i : i + batch])
                bad = [r for r in results if r.status.value == "rejected"]
                if bad:
                    raise RuntimeError(f"{backend}: rejected {bad[0]}")
            elapsed = time.perf_counter() - started
            assert await store.log_length() == len(tokens) + 2
    return len(tokens) / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    args = parser.parse_args()
    tokens = cached_workload(args.ops)
    backends = args.backends.split(",")
    rates = {b: await ingest_rate(b, tokens, args.batch) for b in backends}
    memory = rates.get("memory")
    print(f"ingest of {len(tokens)} ops, batches of {args.batch}")
    for name, rate in rates.items():
        ratio = f"  ratio to memory {rate / memory:.2f}" if memory else ""
        target = f" (target >= {TARGETS[name]})" if name in TARGETS else ""
        print(f"  {name:9s} {rate:8.0f} ops/s{ratio}{target}")


if __name__ == "__main__":
    asyncio.run(main())
