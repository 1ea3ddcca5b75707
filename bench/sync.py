"""Benchmark: sync-in throughput against direct ingestion.

    .venv/bin/python -m bench.sync --ops 100000 [--store sqlite|memory]

1. Direct: a fresh relay ingests the workload with ``relay.ingest`` in
   batches of 100 (the POST /operations limit); that rate is the baseline.
2. Sync: the relay from step 1 is served by hypercorn on loopback (its own
   OS process for SQLite; in this process for memory) and a fresh relay
   with the same store kind pulls everything with ``sync_from_peers()``.

Prints both rates and their ratio (target >= 0.7). Signed workloads are
cached under bench/out/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import httpx

from peer import HttpPeerClient, PeerConfig
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from relay.testing.server import free_port, serve_on_loopback, wait_for_relay
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from stores.factory import open_store_from_url

OUT = Path(__file__).resolve().parent / "out"
PAST_MS = 1_700_000_000_000
BATCH = 100


def workload(n: int, seed: int) -> list[str]:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"workload-{n}-{seed}.json"
    if path.exists():
        tokens: list[str] = json.loads(path.read_text())
        return tokens
    tokens = mixed_workload(n, seed=seed, now_ms=PAST_MS)[:n]
    path.write_text(json.dumps(tokens))
    return tokens


def make_store(kind: str, workdir: Path, name: str) -> RelayStore:
    if kind == "memory":
        return open_store_from_url("memory://")
    return open_store_from_url(f"sqlite:///{workdir / name}.db")


async def direct(tokens: list[str], store: RelayStore) -> float:
    relay = create_relay(store)
    async with relay.running():
        started = time.perf_counter()
        for i in range(0, len(tokens), BATCH):
            await relay.ingest(tokens[i : i + BATCH])
        elapsed = time.perf_counter() - started
        assert await store.log_length() >= len(tokens)
    return len(tokens) / elapsed


async def synced(tokens: list[str], peer_url: str, store: RelayStore) -> tuple[float, int]:
    config = PeeringConfig(sync_budget_ops=len(tokens) + 1000)
    async with httpx.AsyncClient() as http:
        peers = [PeerConfig(peer_url, gossip=False, read_through=False)]
        relay = create_relay(store, peering=build_peering(peers, HttpPeerClient(http), config))
        async with relay.running():
            started = time.perf_counter()
            new = 0
            while True:
                got = await relay.sync_from_peers()
                new += got
                if not got:
                    break
            elapsed = time.perf_counter() - started
            length = await store.log_length()
    return new / elapsed, length


async def run(n: int, kind: str, seed: int) -> None:
    tokens = workload(n, seed)
    print(f"workload: {len(tokens)} ops (store: {kind})")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        source = make_store(kind, workdir, "source")
        direct_rate = await direct(tokens, source)
        print(f"direct ingest (batches of {BATCH}): {direct_rate:,.0f} ops/s")
        async with AsyncExitStack() as stack:
            if kind == "memory":
                peer_relay = create_relay(source)  # same data, served in-process
                peer_url = await stack.enter_async_context(serve_on_loopback(peer_relay.app))
            else:
                port = free_port()
                peer_url = f"http://127.0.0.1:{port}"
                root = Path(__file__).resolve().parents[1]
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tests.support.relay_runner",
                        "--port",
                        str(port),
                        "--store",
                        f"sqlite:///{workdir / 'source.db'}",
                    ],
                    cwd=root,
                    env={**os.environ, "PYTHONPATH": str(root)},
                )
                stack.callback(proc.wait, 10)
                stack.callback(proc.terminate)
                await wait_for_relay(peer_url)
            sync_rate, length = await synced(tokens, peer_url, make_store(kind, workdir, "mirror"))
        print(f"sync over loopback:           {sync_rate:,.0f} ops/s  ({length} ops in log)")
        print(f"ratio sync/direct:            {sync_rate / direct_rate:.2f}  (target >= 0.70)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(run(args.ops, args.store, args.seed))


if __name__ == "__main__":
    main()
