"""Multi-worker benchmark: ``hypercorn --workers 1`` vs ``--workers 2`` on one
Postgres schema, two client processes posting independent workloads
(batches of 50, ``--batch``) at once. Prints throughput of each and the ratio (target
>= 1.5x), and where the CPU went: CPU-milliseconds per op in the relay
workers, in Postgres (all its processes) and in the clients, read from
/proc, so a run on a small machine shows what the cores were spent on.
The server is ``hypercorn relay.asgi:app`` (store URL from
``DFOS_RELAY_STORE``), started by ``tests.support.relay_process``.

    .venv/bin/python -m bench.pg_workers --ops 4000
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx

from bench.common import PG_URL, cached_workload
from tests.support.relay_process import RelayProcess

BATCH = 50  # default ops per POST


def cpu_seconds(match: Callable[[list[str]], bool]) -> float:
    """utime + stime of the live processes whose /proc stat fields match."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        # comm is in parentheses and may hold spaces: split after it.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = [comm, *stat[stat.rindex(")") + 2 :].split()]
        if match(fields):
            total += int(fields[12]) + int(fields[13])
    return total / os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> float:
    return cpu_seconds(lambda f: f[0] == "postgres")


def group_cpu(pgid: int) -> float:
    return cpu_seconds(lambda f: int(f[4]) == pgid)


def client(url: str, tokens: list[str], batch: int, start: float, cpu: Any) -> None:
    while time.time() < start:
        time.sleep(0.001)
    # One connection per request: hypercorn's workers share one listening
    # socket, and a kept-alive connection would pin a client to whichever
    # worker accepted it first (possibly both clients to one worker). A fresh
    # connection goes to a worker that is waiting in accept, as a load
    # balancer in front of the workers would spread requests.
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(timeout=60, limits=limits) as http:
        for i in range(0, len(tokens), batch):
            r = http.post(f"{url}/operations", json={"operations": tokens[i : i + batch]})
            r.raise_for_status()
    cpu.value = time.process_time()


@dataclass(frozen=True)
class Run:
    rate: float
    worker_ms: float  # CPU-ms per op, all relay processes
    postgres_ms: float
    client_ms: float


async def run(workers: int, loads: list[list[str]], batch: int, pg_url: str) -> Run:
    schema = f"bench_w_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in pg_url else "?"
    relay = RelayProcess(f"{pg_url}{sep}schema={schema}", workers=workers)
    await relay.start(timeout=60)
    try:
        assert relay.proc is not None
        pgid = relay.proc.pid
        start = time.time() + 0.5
        cpus = [mp.Value("d", 0.0) for _ in loads]
        procs = [
            mp.Process(target=client, args=(relay.url, load, batch, start, cpu))
            for load, cpu in zip(loads, cpus, strict=True)
        ]
        for p in procs:
            p.start()
        before = (group_cpu(pgid), postgres_cpu())
        for p in procs:
            p.join()
        elapsed = time.time() - start
        after = (group_cpu(pgid), postgres_cpu())
        assert all(p.exitcode == 0 for p in procs)
    finally:
        relay.stop()
        conn = await asyncpg.connect(pg_url)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
    ops = sum(len(x) for x in loads)
    per_op = 1000 / ops
    return Run(
        rate=ops / elapsed,
        worker_ms=(after[0] - before[0]) * per_op,
        postgres_ms=(after[1] - before[1]) * per_op,
        client_ms=sum(c.value for c in cpus) * per_op,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=4000, help="ops per client")
    parser.add_argument(
        "--pg-url", default=PG_URL, help="e.g. postgresql://postgres@/test?host=/var/run/postgresql"
    )
    parser.add_argument("--batch", type=int, default=BATCH, help="ops per POST (at most 100)")
    args = parser.parse_args()
    loads = [cached_workload(args.ops, seed=s) for s in (21, 22)]
    one = await run(1, loads, args.batch, args.pg_url)
    two = await run(2, loads, args.batch, args.pg_url)
    print(
        f"2 clients x {args.ops} ops, batches of {args.batch}, one Postgres schema ({args.pg_url})"
    )
    print(f"  --workers 1: {one.rate:7.0f} ops/s")
    print(f"  --workers 2: {two.rate:7.0f} ops/s   ratio {two.rate / one.rate:.2f} (target >= 1.5)")
    print(f"CPU-ms per op ({os.cpu_count()} cores): relay workers / Postgres / clients")
    for name, r in (("--workers 1", one), ("--workers 2", two)):
        print(f"  {name}: {r.worker_ms:.3f} / {r.postgres_ms:.3f} / {r.client_ms:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
