"""Scale benchmark: ingest a large signed workload (default 1,000,000 ops)
into SQLite and Postgres through ``Relay.ingest`` (batches of 100).

Prints, per backend, measured in the same run:
- the ingest rate over the first and the last window (100k ops, or a tenth
  of the workload if smaller) and their ratio (target >= 0.8), by the wall
  clock and by the process's CPU time (which counts the SQLite thread too,
  and is what stays comparable when other work shares the machine);
- the cost of a ``GET /log`` page (limit 100, after a cursor in the middle)
  and of a state lookup (``GET /identities/{did}``) at 10k ops and at the
  end, and their ratio (target <= 2x).

The workload is generated once and cached under bench/out/. Postgres runs
on the server at ``bench.common.PG_URL`` as it is configured, or, with
``--pg-tuned``, on a throwaway cluster sized for the workload
(``bench.pg_cluster``; a stock install's 128 MB of shared buffers hold
little of a 1M-op relay's indexes).

    .venv/bin/python -m bench.scale --ops 1000000
    .venv/bin/python -m bench.scale --ops 1000000 --backends postgres --pg-tuned
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import time

import httpx

from bench.common import PG_URL, bench_store, cached_workload
from bench.pg_cluster import TUNED, private_cluster
from relay import Relay, create_relay

BATCH = 100
PROBES = 200
EARLY = 10_000


async def probe(relay: Relay, did: str, after: str) -> tuple[float, float]:
    """Mean seconds per GET /log page and per GET /identities/{did}."""
    transport = httpx.ASGITransport(app=relay.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        started = time.perf_counter()
        for _ in range(PROBES):
            r = await client.get("/log", params={"after": after, "limit": "100"})
            assert r.status_code == 200 and len(r.json()["entries"]) == 100
        log_cost = (time.perf_counter() - started) / PROBES
        started = time.perf_counter()
        for _ in range(PROBES):
            assert (await client.get(f"/identities/{did}")).status_code == 200
        state_cost = (time.perf_counter() - started) / PROBES
    return log_cost, state_cost


async def run_backend(name: str, tokens: list[str], window: int, pg_url: str) -> None:
    async with bench_store(name, pg_url) as store:
        relay = create_relay(store)
        async with relay.running():
            stamps = [(0, time.perf_counter())]
            cpu = [(0, time.process_time())]
            early: tuple[float, float] | None = None
            for i in range(0, len(tokens), BATCH):
                await relay.ingest(tokens[i : i + BATCH])
                done = min(i + BATCH, len(tokens))
                stamps.append((done, time.perf_counter()))
                cpu.append((done, time.process_time()))
                if early is None and done >= EARLY:
                    page = await store.read_log(None, done // 2)
                    did = (await store.read_log(None, 3)).entries[2].chain_id
                    early = await probe(relay, did, page.entries[-1].cid)
                    stamps.append((done, time.perf_counter()))  # probes excluded
                    cpu.append((done, time.process_time()))
            total = len(tokens)
            page = await store.read_log(None, 1)
            mid = await store.read_log(None, total // 2)
            did = (await store.read_log(None, 3)).entries[2].chain_id
            late = await probe(relay, did, mid.entries[-1].cid if page.entries else "")
    first = rate_between(stamps, 0, window)
    last = rate_between(stamps, total - window, total)
    first_cpu = rate_between(cpu, 0, window)
    last_cpu = rate_between(cpu, total - window, total)
    assert early is not None
    print(f"{name}: {total} ops" + (f" ({pg_url})" if name == "postgres" else ""))
    print(
        f"  first {window}: {first:7.0f} ops/s   last {window}: {last:7.0f} ops/s   "
        f"ratio {last / first:.2f} (target >= 0.8)"
    )
    print(
        f"  by CPU time: first {first_cpu:7.0f} ops/cpu-s   last {last_cpu:7.0f} ops/cpu-s   "
        f"ratio {last_cpu / first_cpu:.2f}"
    )
    print(
        f"  GET /log page: {early[0] * 1e3:.2f} ms at {EARLY}, {late[0] * 1e3:.2f} ms at end "
        f"-> {late[0] / early[0]:.2f}x (target <= 2)"
    )
    print(
        f"  state lookup:  {early[1] * 1e3:.2f} ms at {EARLY}, {late[1] * 1e3:.2f} ms at end "
        f"-> {late[1] / early[1]:.2f}x (target <= 2)"
    )


def rate_between(stamps: list[tuple[int, float]], lo: int, hi: int) -> float:
    """Ops/s between the stamps nearest ``lo`` and ``hi`` (probe pauses removed)."""
    elapsed, ops = 0.0, 0
    for (n0, t0), (n1, t1) in itertools.pairwise(stamps):
        if n1 > n0 and n0 >= lo and n1 <= hi:
            elapsed += t1 - t0
            ops += n1 - n0
    return ops / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--pg-tuned", action="store_true", help="Postgres on a throwaway cluster sized for 1M ops"
    )
    args = parser.parse_args()
    tokens = cached_workload(args.ops)
    window = min(100_000, len(tokens) // 10)
    with contextlib.ExitStack() as stack:
        pg_url = stack.enter_context(private_cluster(TUNED)) if args.pg_tuned else PG_URL
        if args.pg_tuned:
            print(f"Postgres: private cluster with {TUNED}")
        for name in args.backends.split(","):
            await run_backend(name, tokens, window, pg_url)


if __name__ == "__main__":
    asyncio.run(main())
