"""Ingest benchmark: the same signed mixed workload through ``Relay.ingest``
(in-process) on memory, SQLite and Postgres, in causal order (batches of
100) and shuffled (random order, random batch sizes 1..100).

Prints, measured in the same run (best of ``--repeat`` runs, alternating
stores and orders so that other work on the host hits all alike):
- each rate, and the process CPU time per op;
- in order, each durable store's rate as a ratio of memory's
  (targets: SQLite >= 0.8, Postgres >= 0.65);
- on every store, shuffled as a ratio of in order (target >= 0.9).

Every run must sequence every op (checked against the log length).

    .venv/bin/python -m bench.ingest_stores --ops 10000 --repeat 3
    .venv/bin/python -m bench.ingest_stores --backends memory,postgres \
        --pg-url "postgresql://postgres@127.0.0.1:5432/test?synchronous_commit=off"
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from bench.common import PG_URL, bench_store, cached_workload
from relay import RelayConfig, create_relay

BATCH = 100
TO_MEMORY = {"sqlite": 0.8, "postgres": 0.65}
SHUFFLED_TO_IN_ORDER = 0.9


def plan(tokens: list[str], shuffled: bool, seed: int) -> list[list[str]]:
    """Batches of 100 in order, or a shuffle cut into random sizes 1..100."""
    if not shuffled:
        return [tokens[i : i + BATCH] for i in range(0, len(tokens), BATCH)]
    rng = random.Random(seed)
    order = list(tokens)
    rng.shuffle(order)
    out, i = [], 0
    while i < len(order):
        size = rng.randint(1, BATCH)
        out.append(order[i : i + size])
        i += size
    return out


async def ingest_once(
    backend: str, batches: list[list[str]], n_ops: int, config: RelayConfig, pg_url: str = PG_URL
) -> tuple[float, float]:
    """(ops/s, process CPU seconds per op) of one fresh relay."""
    async with bench_store(backend, pg_url) as store:
        relay = create_relay(store, config=config)
        async with relay.running():
            base = await store.log_length()  # the relay's own identity + profile
            started, cpu = time.perf_counter(), time.process_time()
            for batch in batches:
                await relay.ingest(batch)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            sequenced = await store.log_length() - base
    if sequenced != n_ops:
        raise RuntimeError(f"{backend}: sequenced {sequenced} of {n_ops} ops")
    return n_ops / elapsed, cpu / n_ops


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="best of N alternating runs")
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--verify-threads", type=int, default=None, help="default: per core")
    parser.add_argument("--pg-url", default=PG_URL, help="server settings may ride in the query")
    args = parser.parse_args()
    tokens = cached_workload(args.ops, args.seed)
    backends = args.backends.split(",")
    config = RelayConfig(verify_threads=args.verify_threads)
    plans = {False: plan(tokens, False, args.seed), True: plan(tokens, True, args.seed)}
    best: dict[tuple[str, bool], tuple[float, float]] = {}
    for _ in range(args.repeat):
        for backend in backends:
            for shuffled, batches in plans.items():
                rate, cpu = await ingest_once(backend, batches, len(tokens), config, args.pg_url)
                key = (backend, shuffled)
                if rate > best.get(key, (0.0, 0.0))[0]:
                    best[key] = (rate, cpu)
    print(f"ingest of {len(tokens)} ops (seed {args.seed}), best of {args.repeat}")
    memory = best.get(("memory", False), (0.0, 0.0))[0]
    for backend in backends:
        rate, cpu = best[(backend, False)]
        s_rate, s_cpu = best[(backend, True)]
        line = f"  {backend:9s} in order {rate:7.0f} ops/s ({cpu * 1e6:4.0f} us CPU/op)"
        if memory and backend in TO_MEMORY:
            line += f"  ratio to memory {rate / memory:.2f} (target >= {TO_MEMORY[backend]})"
        print(line)
        print(
            f"  {'':9s} shuffled {s_rate:7.0f} ops/s ({s_cpu * 1e6:4.0f} us CPU/op)"
            f"  ratio to in order {s_rate / rate:.2f} (target >= {SHUFFLED_TO_IN_ORDER})"
        )


if __name__ == "__main__":
    asyncio.run(main())
