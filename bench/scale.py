"""Scale benchmark: ingest a large signed workload (default 1,000,000 ops)
into SQLite and Postgres through ``Relay.ingest`` (batches of 100).

Prints, per backend, measured in the same run:
- the ingest rate over the first and the last window (100k ops, or a tenth
  of the workload if smaller) and their ratio (target >= 0.8), by the wall
  clock and by the process's CPU time (which counts the SQLite thread too,
  and is what stays comparable when other work shares the machine);
- the cost of a ``GET /log`` page (limit 100, after a cursor in the middle),
  of a state lookup (``GET /identities/{did}``) and of a per-chain log page
  (``GET /content/{id}/log``, a chain of the first 10k ops) at 10k ops and at
  the end, and their ratio (target <= 1.5x);
- the process RSS before the relay starts (the workload is loaded by then),
  at 10k ops and at the end, the relay's growth between the last two, and
  the process RSS at the end over at 10k (target <= 1.5x on memory at 100k
  ops; run with a cached workload, as generating one leaves its own memory).

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
import statistics
import time

import httpx

from bench.common import PG_URL, bench_store, cached_workload
from bench.pg_cluster import TUNED, private_cluster
from relay import Relay, create_relay
from stores.base import RelayStore

BATCH = 100
PROBES = 200
EARLY = 10_000


async def probe(relay: Relay, did: str, content_id: str, after: str) -> tuple[float, ...]:
    """Median seconds per GET /log page, GET /identities/{did} and
    GET /content/{id}/log (the median: other work on the host adds spikes)."""
    transport = httpx.ASGITransport(app=relay.app)
    requests: list[tuple[str, dict[str, str]]] = [
        ("/log", {"after": after, "limit": "100"}),
        (f"/identities/{did}", {}),
        (f"/content/{content_id}/log", {"limit": "100"}),
    ]
    costs = []
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for path, params in requests:
            samples = []
            for _ in range(PROBES):
                started = time.perf_counter()
                r = await client.get(path, params=params)
                samples.append(time.perf_counter() - started)
                assert r.status_code == 200
            costs.append(statistics.median(samples))
    return tuple(costs)


def rss_mb() -> float:
    """Resident set size of this process now (VmRSS)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def first_content_chain(store: RelayStore) -> str:
    page = await store.read_log(None, 1000)
    return next(e.chain_id for e in page.entries if e.kind == "content-op")


async def run_backend(name: str, tokens: list[str], window: int, pg_url: str) -> None:
    base_rss = rss_mb()
    async with bench_store(name, pg_url) as store:
        relay = create_relay(store)
        async with relay.running():
            stamps = [(0, time.perf_counter())]
            cpu = [(0, time.process_time())]
            early: tuple[float, ...] | None = None
            early_rss = 0.0
            for i in range(0, len(tokens), BATCH):
                await relay.ingest(tokens[i : i + BATCH])
                done = min(i + BATCH, len(tokens))
                stamps.append((done, time.perf_counter()))
                cpu.append((done, time.process_time()))
                if early is None and done >= EARLY:
                    page = await store.read_log(None, done // 2)
                    did = (await store.read_log(None, 3)).entries[2].chain_id
                    content_id = await first_content_chain(store)
                    early = await probe(relay, did, content_id, page.entries[-1].cid)
                    early_rss = rss_mb()
                    stamps.append((done, time.perf_counter()))  # probes excluded
                    cpu.append((done, time.process_time()))
            total = len(tokens)
            page = await store.read_log(None, 1)
            mid = await store.read_log(None, total // 2)
            did = (await store.read_log(None, 3)).entries[2].chain_id
            content_id = await first_content_chain(store)
            after = mid.entries[-1].cid if page.entries else ""
            late = await probe(relay, did, content_id, after)
            late_rss = rss_mb()
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
    labels = ("GET /log page", "state lookup", "chain log page")
    for label, e, lt in zip(labels, early, late, strict=True):
        print(
            f"  {label + ':':15s} {e * 1e3:.2f} ms at {EARLY}, {lt * 1e3:.2f} ms at end "
            f"-> {lt / e:.2f}x (target <= 1.5)"
        )
    print(
        f"  RSS: {base_rss:.0f} MB before the relay (workload loaded), {early_rss:.0f} MB "
        f"at {EARLY}, {late_rss:.0f} MB at end -> relay {early_rss - base_rss:.0f} MB "
        f"-> {late_rss - base_rss:.0f} MB ({(late_rss - base_rss) / (early_rss - base_rss):.2f}x)"
    )
    # issue 17's memory target is the process's RSS at the end over at 10k
    print(f"  RSS at end / at {EARLY}: {late_rss / early_rss:.2f}x (target <= 1.5 on memory)")


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
