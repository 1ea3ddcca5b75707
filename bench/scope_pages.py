"""Scoped ``GET /log`` page cost: every page of a scope read in turn. Not a
test; CI does not run it::

    .venv/bin/python -m bench.scope_pages [--ops 5000] [--limit 100]
                                          [--backends sqlite]

One content chain gains a co-author every 50 ops (the closure grows as the
log does), with countersignatures of it and ops of another chain beside
it; about 85% of the log is in scope. Per backend, the pages are read
through ``scoped_log_page`` with the relay's closure checkpoints, as
``GET /log?scope=`` reads them. The figure is the ratio of a late page's
cost to an early one's (median of the last 10 over the first 10): flat
paging keeps it near 1, a closure recomputed per page makes it grow with
the log.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench.common import bench_store
from relay import create_relay
from relay.scope import Scope
from relay.scope.pages import scoped_log_page
from relay.testing.workload import WorkloadBuilder

START_MS = 1_700_000_000_000


def workload(n: int) -> tuple[list[str], str]:
    """At least ``n`` signed ops, and the contentId whose scope is read."""
    b = WorkloadBuilder(seed=5, start_ms=START_MS, step_ms=50)
    creator = b.identity()
    chain = b.content_create(creator)
    other = b.content_create(b.identity())
    delegates = []
    i = 0
    while len(b.tokens) < n:
        i += 1
        if i % 50 == 1:  # a new co-author joins: the closure grows
            delegate = b.identity()
            delegates.append((delegate, b.write_credential(creator, delegate, chain.content_id)))
        if i % 7 == 0:
            delegate, credential = delegates[i % len(delegates)]
            b.content_update(chain, delegate, authorization=credential)
        elif i % 11 == 0:
            b.countersign(delegates[i % len(delegates)][0], chain.head_cid)
        elif i % 5 == 0:
            b.content_update(other)  # out of scope
        else:
            b.content_update(chain)
    return b.tokens, chain.content_id


async def run(n_ops: int, limit: int, backends: list[str]) -> None:
    started = time.perf_counter()
    tokens, member = workload(n_ops)
    print(f"workload: {len(tokens)} ops in {time.perf_counter() - started:.0f}s")
    for backend in backends:
        async with bench_store(backend) as store:
            relay = create_relay(store)
            async with relay.running():
                for i in range(0, len(tokens), 200):
                    await relay.ingest(tokens[i : i + 200])
                scope, after, times, entries = Scope.of([member]), None, [], 0
                while True:
                    t = time.perf_counter()
                    page = await scoped_log_page(
                        store, scope, after, limit, checkpoints=relay.scope_checkpoints
                    )
                    times.append(time.perf_counter() - t)
                    entries += len(page.entries)
                    if (after := page.cursor) is None:
                        break
        early, late = statistics.median(times[:10]), statistics.median(times[-10:])
        print(
            f"{backend}: {entries} ops in scope, {len(times)} pages of {limit}: "
            f"early page {early * 1e3:.1f} ms, late page {late * 1e3:.1f} ms, "
            f"all pages {sum(times):.2f} s; late / early {late / early:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--backends", default="sqlite")
    args = parser.parse_args()
    asyncio.run(run(args.ops, args.limit, args.backends.split(",")))


if __name__ == "__main__":
    main()
