"""A scoped mirror's guard under batches that each hold one op outside the
scope (what a hostile peer can send, page after page). Not a test; CI does
not run it::

    .venv/bin/python -m bench.scope_guard [--ops 3000] [--batches 200]
                                          [--backends sqlite]

The scope is 10 DIDs with artifacts and 100 content chains with
co-authors and countersignatures (about ``--ops`` ops, all in the
mirror's store). Each batch is one outsider's artifact, judged by the
scope's ``ScopeGuard`` over the store as a scoped ``/log`` sync, the feed
and reconciliation judge theirs: first alone, then each after the relay
committed one more op of the scope (as a client or another link would).
The figures: time per batch (median, max), store rows the guard reads per
batch, and the event loop's longest stall meanwhile (a 1 ms ticker; the
memory store never yields, so there it is the whole run of batches, and
with commits between them it includes ingest). A guard that recomputes the closure per
batch reads the whole scope each time; one brought forward reads what was
committed since.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from bench.common import bench_store
from relay import Relay, create_relay
from relay.scope import Scope, ScopeGuard
from relay.testing.workload import WorkloadBuilder
from stores.base import FeedEntry, OperationKind, RelayStore

START_MS = 1_700_000_000_000


def workload(n: int, batches: int) -> tuple[list[str], Scope, list[str], list[str]]:
    """About ``n`` signed ops of a scope, the scope, ``batches`` ops outside
    it and ``batches`` more ops of the scope (committed between batches)."""
    b = WorkloadBuilder(seed=9, start_ms=START_MS, step_ms=5)
    owners = [b.identity() for _ in range(10)]
    coauthors = [b.identity() for _ in range(20)]
    chains = [b.content_create(owners[i % len(owners)]) for i in range(100)]
    i = 0
    while len(b.tokens) < n:
        i += 1
        chain = chains[i % len(chains)]
        if i % 4 == 0:
            author = coauthors[i % len(coauthors)]
            grant = b.write_credential(chain.creator, author, chain.content_id)
            b.content_update(chain, author, authorization=grant)
        elif i % 9 == 0:
            b.countersign(coauthors[i % len(coauthors)], chain.head_cid)
        elif i % 2 == 0:
            b.content_update(chain)
        else:
            b.artifact(owners[i % len(owners)])
    in_scope = list(b.tokens)
    outsider = b.identity()
    for _ in range(batches):
        b.artifact(outsider)
    outside = b.tokens[-batches:]
    for i in range(batches):
        b.content_update(chains[i % len(chains)])
    later = b.tokens[-batches:]
    scope = Scope.of([o.did for o in owners] + [c.content_id for c in chains])
    return in_scope, scope, outside, later


class Counted:
    """``store`` as the guard reads it, counting the rows its reads return."""

    def __init__(self, store: RelayStore) -> None:
        self.store = store
        self.rows = 0

    async def log_length(self) -> int:
        return await self.store.log_length()

    async def get_feed_epoch(self) -> str:
        return await self.store.get_feed_epoch()

    async def read_seq_range(self, after_seq: int, until_seq: int, limit: int) -> list[FeedEntry]:
        return self._count(await self.store.read_seq_range(after_seq, until_seq, limit))

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        return self._count(await self.store.read_chain_entries(chain_id, kinds, until_seq))

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        found = await self.store.read_chains_entries_after(
            chain_ids, kinds, after_seq, until_seq, limit
        )
        return self._count(found)

    def _count(self, entries: list[FeedEntry]) -> list[FeedEntry]:
        self.rows += len(entries)
        return entries


async def longest_stall(work: asyncio.Task[Figures]) -> float:
    """The longest the loop went without running a 1 ms ticker while ``work`` ran."""
    last = [time.perf_counter()]
    longest = [0.0]

    async def tick() -> None:
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest[0] = max(longest[0], now - last[0])
            last[0] = now

    ticker = asyncio.create_task(tick())
    try:
        await work
    finally:
        ticker.cancel()
    # a loop that never let the ticker run stalled for all of it
    return max(longest[0], time.perf_counter() - last[0])


@dataclass
class Figures:
    times: list[float] = field(default_factory=list)  # s per batch
    rows: list[int] = field(default_factory=list)  # store rows the guard read per batch

    def line(self, stall: float) -> str:
        return (
            f"per batch median {statistics.median(self.times) * 1e3:.2f} ms, "
            f"max {max(self.times) * 1e3:.2f} ms, all {sum(self.times):.2f} s; "
            f"rows read per batch median {statistics.median(self.rows):.0f}, "
            f"max {max(self.rows)}; longest loop stall {stall * 1e3:.1f} ms"
        )


async def judge(
    guard: ScopeGuard, reader: Counted, outside: list[str], commits: tuple[Relay, list[str]] | None
) -> Figures:
    """Each of ``outside`` judged as a batch of its own; with ``commits``,
    the relay ingests one of them before each batch (another path: a
    client, another in-link)."""
    figures = Figures()
    for n, token in enumerate(outside):
        if commits is not None:
            relay, tokens = commits
            assert all(r.reason is None for r in await relay.ingest([tokens[n]]))
        reader.rows = 0
        t = time.perf_counter()
        split = await guard.split([token])
        figures.times.append(time.perf_counter() - t)
        figures.rows.append(reader.rows)
        assert not split.kept and len(split.outside) == 1
    return figures


async def run(n_ops: int, batches: int, backends: list[str]) -> None:
    started = time.perf_counter()
    in_scope, scope, outside, later = workload(n_ops, batches)
    print(f"workload: {len(in_scope)} ops in scope in {time.perf_counter() - started:.0f}s")
    for backend in backends:
        async with bench_store(backend) as store:
            relay = create_relay(store)
            async with relay.running():
                for i in range(0, len(in_scope), 200):
                    results = await relay.ingest(in_scope[i : i + 200])
                    assert all(r.reason is None for r in results)
                reader = Counted(store)
                guard = ScopeGuard(reader, scope)
                await guard.split([])  # the first closure: once per guard either way
                for commits in (None, (relay, later)):
                    work = asyncio.create_task(judge(guard, reader, outside, commits))
                    stall = await longest_stall(work)
                    what = "alone" if commits is None else "each after one in-scope commit"
                    print(
                        f"{backend}: {batches} batches of one op outside a scope of "
                        f"{len(in_scope)} ops, {what}: {work.result().line(stall)}"
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=3000)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--backends", default="sqlite")
    args = parser.parse_args()
    asyncio.run(run(args.ops, args.batches, args.backends.split(",")))


if __name__ == "__main__":
    main()
