"""Multi-worker benchmark: ``hypercorn --workers 1`` vs ``--workers 2`` on one
Postgres schema, two client processes posting independent workloads
(batches of 50) at once. Prints throughput of each and the ratio (target
>= 1.5x). The server is ``tests.support.app_from_env:app`` (store URL from
``DFOS_STORE_URL``).

    .venv/bin/python -m bench.pg_workers --ops 4000
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time
import uuid

import asyncpg
import httpx

from bench.common import PG_URL, cached_workload
from tests.support.relay_process import RelayProcess

BATCH = 50


def client(url: str, tokens: list[str], start: float) -> None:
    while time.time() < start:
        time.sleep(0.001)
    # One connection per request: hypercorn's workers share one listening
    # socket, and a kept-alive connection would pin a client to whichever
    # worker accepted it first (possibly both clients to one worker). A fresh
    # connection goes to a worker that is waiting in accept, as a load
    # balancer in front of the workers would spread requests.
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(timeout=60, limits=limits) as http:
        for i in range(0, len(tokens), BATCH):
            r = http.post(f"{url}/operations", json={"operations": tokens[i : i + BATCH]})
            r.raise_for_status()


async def run(workers: int, loads: list[list[str]]) -> float:
    schema = f"bench_w_{uuid.uuid4().hex[:8]}"
    relay = RelayProcess(f"{PG_URL}?schema={schema}", workers=workers)
    await relay.start(timeout=60)
    try:
        start = time.time() + 0.5
        procs = [mp.Process(target=client, args=(relay.url, load, start)) for load in loads]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.time() - start
        assert all(p.exitcode == 0 for p in procs)
    finally:
        relay.stop()
        conn = await asyncpg.connect(PG_URL)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
    return sum(len(x) for x in loads) / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=4000, help="ops per client")
    args = parser.parse_args()
    loads = [cached_workload(args.ops, seed=s) for s in (21, 22)]
    one = await run(1, loads)
    two = await run(2, loads)
    print(f"2 clients x {args.ops} ops, batches of {BATCH}, one Postgres schema")
    print(f"  --workers 1: {one:7.0f} ops/s")
    print(f"  --workers 2: {two:7.0f} ops/s   ratio {two / one:.2f} (target >= 1.5)")


if __name__ == "__main__":
    asyncio.run(main())
