"""How long a purge holds up ingestion (``PUT /admin/bans/{did}`` with
``"purge": true``).

One DID signs ``--ops`` ops: content chains of 100 ops each, its own
(``--shape chains``), or one content chain of all of them (``--shape
long-chain``: each step rewinds that chain over what remains of it); another
DID posts a beacon every 20 ms (``POST /operations``, in-process)
while the purge runs. Prints how long the purge took, how many probe posts
completed before it ended, and the probes' p50 / max latency.

    PYTHONPATH=. .venv/bin/python -m bench.purge_lock --store sqlite --ops 50000
    ... --step-ops 1000000   # the whole purge in one step, as it was before steps
    ... --shape long-chain --ops 40000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import httpx

from bench.common import OUT, bench_store
from relay import create_relay
from relay.admin.auth import AdminCaller
from relay.admin.service import Admin
from relay.config import DEFAULT_PURGE_STEP_OPS, RelayConfig
from relay.testing.workload import WorkloadBuilder

CHAIN_OPS = 100
PROBE_EVERY_S = 0.02


SHAPES = ("chains", "long-chain")


def workload(ops: int, shape: str = "chains") -> tuple[list[str], list[str], str]:
    """(setup tokens, probe beacons, the purged DID), cached in bench/out."""
    OUT.mkdir(exist_ok=True)
    path = OUT / (f"purge-{ops}.json" if shape == "chains" else f"purge-{shape}-{ops}.json")
    if path.exists() and time.time() - path.stat().st_mtime < 20 * 86400:
        setup, probes, did = json.loads(path.read_text())
        return setup, probes, did
    b = WorkloadBuilder(seed=3, start_ms=time.time_ns() // 1_000_000 - 25 * 86_400_000)
    alice, bob = b.identity(), b.identity()
    chain_ops = CHAIN_OPS if shape == "chains" else ops
    while len(b.tokens) < ops:
        chain = b.content_create(alice)
        for _ in range(min(chain_ops, ops - len(b.tokens)) - 1):
            b.content_update(chain, alice)
    setup = list(b.tokens)
    probes = [b.beacon(bob) and b.tokens[-1] for _ in range(2000)]
    path.write_text(json.dumps([setup, probes, alice.did]))
    return setup, probes, alice.did


async def run(store_name: str, ops: int, step_ops: int, shape: str) -> dict[str, float]:
    setup, probes, did = workload(ops, shape)
    async with bench_store(store_name) as store:
        relay = create_relay(store, config=RelayConfig(purge_step_ops=step_ops))
        async with relay.running():
            for i in range(0, len(setup), 2000):
                await relay.ingest(setup[i : i + 2000])
            admin = Admin(relay, AdminCaller("did:dfos:bench", "bench", 0))
            transport = httpx.ASGITransport(app=relay.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://r") as http:
                started = time.perf_counter()
                purge = asyncio.create_task(admin.ban(did, "bench", purge=True))
                latencies: list[float] = []
                during = 0
                for token in probes:
                    sent = time.perf_counter()
                    answer = await http.post("/operations", json={"operations": [token]})
                    assert answer.status_code == 200, answer.text
                    latencies.append(time.perf_counter() - sent)
                    during += not purge.done()
                    if purge.done():
                        break
                    await asyncio.sleep(PROBE_EVERY_S)
                outcome = await purge
                took = time.perf_counter() - started
    assert outcome.purge is not None
    return {
        "purged": outcome.purge.operations,
        "purge_s": round(took, 2),
        "probes_during": during,
        "probe_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "probe_max_ms": round(max(latencies) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("memory", "sqlite", "postgres"), default="sqlite")
    parser.add_argument("--ops", type=int, default=50_000)
    parser.add_argument("--step-ops", type=int, default=DEFAULT_PURGE_STEP_OPS)
    parser.add_argument("--shape", choices=SHAPES, default="chains")
    args = parser.parse_args()
    result = asyncio.run(run(args.store, args.ops, args.step_ops, args.shape))
    print(args.store, args.ops, args.shape, f"step {args.step_ops}", result)


if __name__ == "__main__":
    main()
