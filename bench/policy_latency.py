"""Ingestion throughput and latency with a slow write policy (memory store).

N clients post single-op batches concurrently (a beacon each, of its own
identity, ``--rounds`` times) to one relay whose write policy takes
``--latency-ms`` per call (``time.sleep`` in the policy's worker thread, or
``asyncio.sleep`` with ``--async-policy``). Prints ops/s and the p50/p99
latency of a post, and the p50/p99 latency of a post by an exempt signer
(one the policy is not asked about: an operator) made meanwhile, one every
50 ms.

    PYTHONPATH=. .venv/bin/python -m bench.policy_latency --clients 16
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import replace

from relay import create_relay
from relay.ingest.policy import VerifiedOp, WritePolicy
from relay.rules.outcomes import Status
from relay.testing.workload import WorkloadBuilder
from stores.memory import MemoryStore


def _policies(latency_s: float) -> tuple[object, object]:
    def slow(op: VerifiedOp, signer: str) -> None:
        time.sleep(latency_s)

    async def slow_async(op: VerifiedOp, signer: str) -> None:
        await asyncio.sleep(latency_s)

    return slow, slow_async


async def run(clients: int, rounds: int, latency_ms: float, use_async: bool) -> dict[str, float]:
    b = WorkloadBuilder(seed=7, start_ms=time.time_ns() // 1_000_000 - 86_400_000)
    actors = [b.identity() for _ in range(clients)]
    operator = b.identity()
    identities = list(b.tokens)
    beacons = [[b.beacon(actor) and b.tokens[-1] for _ in range(rounds)] for actor in actors]
    probes = [b.beacon(operator) and b.tokens[-1] for _ in range(200)]
    relay = create_relay(MemoryStore())
    slow, slow_async = _policies(latency_ms / 1000)
    async with relay.running():
        await relay.ingest(identities)
        function = slow_async if use_async else slow
        relay.gate.policy = replace(WritePolicy(function, "slow"), timeout_s=5.0)  # type: ignore[arg-type]
        relay.gate.exempt(operator.did)
        latencies: list[float] = []
        exempt: list[float] = []
        done = asyncio.Event()

        async def probe() -> None:
            for token in probes:
                if done.is_set():
                    return
                started = time.perf_counter()
                [result] = await relay.ingest([token])
                exempt.append(time.perf_counter() - started)
                assert result.status is Status.NEW, result
                await asyncio.sleep(0.05)

        async def client(tokens: list[str]) -> None:
            for token in tokens:
                started = time.perf_counter()
                [result] = await relay.ingest([token])
                latencies.append(time.perf_counter() - started)
                assert result.status is Status.NEW, result

        started = time.perf_counter()
        probing = asyncio.ensure_future(probe())
        await asyncio.gather(*(client(tokens) for tokens in beacons))
        elapsed = time.perf_counter() - started
        done.set()
        await probing
    latencies.sort()
    exempt.sort()
    return {
        "exempt_p50_ms": statistics.median(exempt) * 1000,
        "exempt_p99_ms": exempt[min(len(exempt) - 1, int(len(exempt) * 0.99))] * 1000,
        "ops": len(latencies),
        "ops_per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--async-policy", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(run(args.clients, args.rounds, args.latency_ms, args.async_policy))
    kind = "async" if args.async_policy else "sync"
    print(
        f"{args.clients} clients x {args.rounds} posts, {kind} policy {args.latency_ms:g} ms: "
        f"{figures['ops_per_s']:.1f} ops/s, p50 {figures['p50_ms']:.0f} ms, "
        f"p99 {figures['p99_ms']:.0f} ms; an exempt post: p50 {figures['exempt_p50_ms']:.0f} ms, "
        f"p99 {figures['exempt_p99_ms']:.0f} ms"
    )


if __name__ == "__main__":
    main()
