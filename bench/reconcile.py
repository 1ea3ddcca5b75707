"""Benchmark: reconciliation against full log sync, on one machine, one run.

    .venv/bin/python -m bench.reconcile --ops 1000000 --diff 1000

1. Two memory relays A and B hold the same ``--ops`` ops, and ``--diff``
   ops each that the other lacks. B is served by hypercorn on loopback.
2. Full sync: A pages B's whole ``GET /log`` and ingests it, then B pages
   A's (the way v0.7.1 relays converge): wall time and bytes.
3. Each side gets ``--diff`` new ops again; A reconciles with B (Negentropy
   rounds, then the transfer of the difference both ways): round trips,
   bytes each way, wall time; ratio to full sync (target <= 0.05) and
   reconciliation bytes (target <= 1 MiB).
4. The now identical pair: one round trip, bytes (target < 1 KiB).
5. The fingerprint index rebuilt from A's store (time at this size), and the
   ingest rate with the index maintained over the rate without it, measured
   on alternating batches of the same workload (target >= 0.95).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

import httpx

from bench.common import cached_workload
from peer.sync_http import HttpSyncClient
from relay import Relay, create_relay
from relay.peering.backoff import Backoff
from relay.peering.config import PeeringConfig
from relay.peering.sync import SyncIn
from relay.reconcile.index import FingerprintIndex
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder
from stores.memory import MemoryStore

BATCH = 100


def fresh_identities(n: int, seed: int) -> list[str]:
    b = WorkloadBuilder(seed=seed)
    for _ in range(n):
        b.identity()
    return list(b.tokens)


async def ingest(relay: Relay, tokens: Sequence[str]) -> None:
    for at in range(0, len(tokens), BATCH):
        await relay.ingest(tokens[at : at + BATCH])


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts request and response body bytes (what crossed the wire)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent = 0
        self.received = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.sent += len(request.content)
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        self.received += len(body)
        return httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


async def full_sync(a: Relay, b_url: str) -> tuple[float, int]:
    """A pages B's whole log and ingests it; (seconds, bytes received)."""
    transport = CountingTransport()
    config = PeeringConfig(sync_budget_ops=10**9, sync_page_limit=1000)
    async with httpx.AsyncClient(transport=transport, timeout=60) as http:
        client = HttpSyncClient(http)
        started = time.perf_counter()
        sync = SyncIn([b_url], client, Backoff(0.1, 1), config)
        sync.start(a)
        await sync.sync_peer(b_url, from_start=True)
        seconds = time.perf_counter() - started
    return seconds, transport.received


async def run(n: int, diff: int) -> None:
    tokens = cached_workload(n)
    print(f"workload: {len(tokens):,} ops, {diff:,} different on each side")
    # first, while nothing else lives in this process
    await index_overhead(tokens[: min(len(tokens), 100_000)])
    a, b = create_relay(MemoryStore()), create_relay(MemoryStore())
    async with (
        a.running(),
        b.running(),
        serve_on_loopback(b.app) as b_url,
        serve_on_loopback(a.app) as a_url,
    ):
        started = time.perf_counter()
        await ingest(a, tokens)
        await ingest(b, tokens)
        await ingest(a, fresh_identities(diff, seed=101))
        await ingest(b, fresh_identities(diff, seed=102))
        print(f"setup: both relays loaded in {time.perf_counter() - started:.0f}s")

        # full sync both ways: A pulls B's log, B pulls A's
        sync_a, bytes_a = await full_sync(a, b_url)
        sync_b, bytes_b = await full_sync(b, a_url)
        full_s, full_bytes = sync_a + sync_b, bytes_a + bytes_b
        assert await a.store.log_length() == await b.store.log_length()
        print(f"full /log sync both ways:   {full_s:8.1f} s  {full_bytes / 2**20:9.1f} MiB")

        # diverge again by the same amount, then reconcile
        await ingest(a, fresh_identities(diff, seed=103))
        await ingest(b, fresh_identities(diff, seed=104))
        await a.sync_index.ready()
        await b.sync_index.ready()
        report = await a.reconcile(b_url)
        assert report.ok, report.error
        assert await a.store.log_length() == await b.store.log_length()
        nego = report.bytes_sent + report.bytes_received
        print(
            f"reconciliation:             {report.seconds:8.2f} s  "
            f"{report.rounds} round trips, {report.bytes_sent / 1024:.0f} KiB sent, "
            f"{report.bytes_received / 1024:.0f} KiB received; "
            f"{report.sequenced} pulled, {report.pushed} pushed"
        )
        print(f"ratio reconcile/full sync:  {report.seconds / full_s:8.4f}  (target <= 0.05)")
        print(f"reconciliation bytes:       {nego / 2**20:8.3f} MiB  (target <= 1 MiB)")

        same = await a.reconcile(b_url)
        print(
            f"identical pair:             {same.rounds} round trip, "
            f"{same.bytes_sent + same.bytes_received} bytes  (target: 1, < 1024)"
        )

        index = FingerprintIndex(a.store)
        await index.rebuild()
        print(f"index rebuild at {index.tree.size():,} ops: {index.rebuild_seconds:.1f} s")


async def index_overhead(tokens: list[str]) -> None:
    """Two fresh relays ingest the same ops in alternating slices; one
    keeps the index current on every commit, the other has it detached."""
    with_index, without = create_relay(MemoryStore()), create_relay(MemoryStore())
    without.ingestor._listeners.remove(without.sync_index.on_sequenced)
    times: dict[str, list[float]] = {"with": [], "without": []}
    slice_ops = 5_000
    async with with_index.running(), without.running():
        await with_index.sync_index.ready()
        for at in range(0, len(tokens), slice_ops):
            part = tokens[at : at + slice_ops]
            order = [("with", with_index), ("without", without)]
            if (at // slice_ops) % 2:
                order.reverse()
            for name, relay in order:
                # CPU time of this process: the memory store does no I/O, and
                # other load on the machine does not count against either side
                started = time.process_time()
                await ingest(relay, part)
                times[name].append(time.process_time() - started)
        assert with_index.sync_index.tree.size() == await with_index.store.log_length()
    # the median slice of each: one slow slice (a GC pass, a busy neighbour) is noise
    rate_with = slice_ops / statistics.median(times["with"])
    rate_without = slice_ops / statistics.median(times["without"])
    print(
        f"ingest with index {rate_with:,.0f} ops/s, without {rate_without:,.0f} ops/s "
        f"(median of {len(times['with'])} alternating slices): "
        f"ratio {rate_with / rate_without:.3f}  (target >= 0.95)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--diff", type=int, default=1_000)
    args = parser.parse_args()
    asyncio.run(run(args.ops, args.diff))


if __name__ == "__main__":
    main()
