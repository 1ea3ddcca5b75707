"""Scope closure benchmark (issue 15): what computing a scope's effective
item set costs, next to reading the whole log once. Not a test; CI does
not run it::

    .venv/bin/python -m bench.scope_closure [--ops 10000] [--members 100]
                                            [--backends memory,sqlite,postgres]

Per backend: ingest ``--ops`` ops, pick a scope of ``--members`` members
(half DIDs, half contentIds, the first of each in log order), then time
``effective_scope`` at the head (median of 5) and, as the yardstick of the
same run, one read of the whole log by seq range. A closure reads the
scope's chains, their countersignatures and the identity chains they
depend on, so the ratio says how far a scoped open (feed, reconcile) is
from a scan of everything.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from bench.common import PG_URL, bench_store, cached_workload
from relay import create_relay
from relay.scope import Scope, effective_scope
from stores.base import RelayStore

REPEAT = 5


async def pick_scope(store: RelayStore, members: int) -> Scope:
    head = await store.log_length()
    entries = await store.read_seq_range(0, head, head)
    dids = list(dict.fromkeys(e.chain_id for e in entries if e.kind == "identity-op"))
    contents = list(dict.fromkeys(e.chain_id for e in entries if e.kind == "content-op"))
    half = members // 2
    return Scope.of(dids[:half] + contents[: members - half])


async def median_s(work: Callable[[], Awaitable[object]]) -> float:
    samples = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        await work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def run(backend: str, tokens: list[str], members: int, pg_url: str) -> None:
    async with bench_store(backend, pg_url) as store:
        relay = create_relay(store)
        async with relay.running():
            for i in range(0, len(tokens), 100):
                await relay.ingest(tokens[i : i + 100])
            scope = await pick_scope(store, members)
            head = await store.log_length()
            eff = await effective_scope(store, scope, head)
            closure = await median_s(lambda: effective_scope(store, scope, head))
            scan = await median_s(lambda: store.read_seq_range(0, head, head))
    print(
        f"{backend}: scope of {len(scope.members)} members over {head} ops "
        f"({len(eff.identities)} identity chains in its closure): effective_scope "
        f"{closure * 1e3:.1f} ms; one read of the whole log {scan * 1e3:.1f} ms "
        f"(closure / scan {closure / scan:.2f})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--pg-url", default=PG_URL)
    args = parser.parse_args()
    tokens = cached_workload(args.ops)[: args.ops]
    for backend in args.backends.split(","):
        await run(backend, tokens, args.members, args.pg_url)


if __name__ == "__main__":
    asyncio.run(main())
