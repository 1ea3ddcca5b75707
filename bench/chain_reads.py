"""Per-request cost of the fork and DID read routes on a long chain. Not a
test; CI does not run it::

    .venv/bin/python -m bench.chain_reads [--ops 20000] [--backends memory,sqlite,postgres]

One identity chain of ``--ops`` ops (key rotations) and one content chain
of ``--ops`` updates with a one-op fork from its middle, ingested in-process.
Each route is then asked ``--probes`` times over httpx's ASGI transport and
the median is printed (other work on the host adds spikes):

- ``GET /identities/{did}/tips``, ``GET /content/{id}/tips``
- ``GET /identities/{did}/log?branch=<head>``: the first page (genesis end)
  and the last page (``after`` = the op 50 before the head)
- ``GET /content/{id}/log?branch=<fork>``: the first page
- ``GET /1.0/identifiers/{did}``

Before ``ForkReader`` every one of them read and decoded the whole chain;
now they read the rows they answer, and what still grows with the chain is
the store's own index work (see bench/README.md; compare ``--ops 2000`` with
``--ops 20000``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx

from bench.common import bench_store
from relay import create_relay
from relay.testing.workload import WorkloadBuilder

START_MS = 1_600_000_000_000
BATCH = 200


def workload(n: int) -> tuple[list[str], dict[str, str]]:
    """The signed ops, and the ids the routes are asked about."""
    b = WorkloadBuilder(seed=11, start_ms=START_MS, step_ms=10)
    alice = b.identity()
    ops = [alice.head_cid]
    while len(ops) < n:
        ops.append(b.rotate(alice))
    chain = b.content_create(b.identity())
    while len(chain.ops) < n:
        b.content_update(chain)
    fork = b.content_update(chain, parent=chain.ops[n // 2])
    ids = {
        "did": alice.did,
        "head": alice.head_cid,
        "late": ops[-51],
        "content": chain.content_id,
        "fork": fork,
    }
    return b.tokens, ids


def routes(ids: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    did, content = ids["did"], ids["content"]
    return [
        ("identity tips", f"/identities/{did}/tips", {}),
        ("content tips", f"/content/{content}/tips", {}),
        ("branch log, first page", f"/identities/{did}/log", {"branch": ids["head"]}),
        (
            "branch log, last page",
            f"/identities/{did}/log",
            {"branch": ids["head"], "after": ids["late"]},
        ),
        ("fork branch, first page", f"/content/{content}/log", {"branch": ids["fork"]}),
        ("DID resolution", f"/1.0/identifiers/{did}", {}),
    ]


async def run(n_ops: int, probes: int, backends: list[str]) -> None:
    started = time.perf_counter()
    tokens, ids = workload(n_ops)
    print(f"workload: {len(tokens)} ops in {time.perf_counter() - started:.0f}s")
    for backend in backends:
        async with bench_store(backend) as store:
            relay = create_relay(store)
            async with relay.running():
                for i in range(0, len(tokens), BATCH):
                    await relay.ingest(tokens[i : i + BATCH])
                transport = httpx.ASGITransport(app=relay.app)
                async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
                    for name, path, params in routes(ids):
                        samples = []
                        for _ in range(probes):
                            t = time.perf_counter()
                            response = await client.get(path, params=params)
                            samples.append(time.perf_counter() - t)
                            assert response.status_code == 200, response.text
                        ms = statistics.median(samples) * 1e3
                        print(f"{backend:8} {name:24} {ms:8.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    args = parser.parse_args()
    asyncio.run(run(args.ops, args.probes, args.backends.split(",")))


if __name__ == "__main__":
    main()
