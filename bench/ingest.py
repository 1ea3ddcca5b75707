"""Ingest benchmark (issues 2 and 17): relay throughput next to the cost of
the cryptography alone.

Not a test; CI does not run it. Usage::

    .venv/bin/python bench/ingest.py [--ops 10000] [--seed 1] [--repeat 3]
                                     [--verify-threads N] [--profile]

1. Generate >= N signed ops of every kind (``mixed_workload``).
2. Measure, single core, with the right key for each op (a key map built
   from the workload's identity ops):
   - the *verify-only* rate: PyNaCl's Ed25519 verify of each op's signing
     input, nothing else (the cryptographic floor of any relay);
   - decode + CID check + verify, the floor of a relay written like ours.
3. The precheck of one batch (100 and 1000 ops: canonical CBOR, CID,
   Ed25519) on the relay's thread pool with 1 and 2 threads: wall time and
   CPU seconds (best of 20), the numbers behind "what more cores buy".
4. Ingest through hypercorn on loopback (one httpx connection, sequential
   requests) into a fresh memory relay: in causal order in batches of 100,
   then shuffled (random order, random batch sizes 1..100). Both runs must
   sequence every op (checked against the relay's log length).

Targets (ratios measured in this run): in order >= 0.6 x the verify-only
rate; shuffled >= 0.9 x in order.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relay import RelayConfig, create_relay
from relay.ingest.parallel import PrecheckPool
from relay.protocol import (
    check_cid,
    decode_jws,
    decode_multikey,
    verify_signature,
)
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload

BATCH = 100
KEY_FIELDS = ("authKeys", "assertKeys", "controllerKeys")


def key_map(tokens: Sequence[str]) -> dict[str, bytes]:
    """key id -> raw public key, from every identity op of the workload.

    Key ids derive from the public key, so they are unique across DIDs.
    """
    keys: dict[str, bytes] = {}
    for token in tokens:
        decoded = decode_jws(token)
        for field in KEY_FIELDS:
            for key in decoded.payload.get(field, ()) or ():  # type: ignore[attr-defined]
                keys[key["id"]] = decode_multikey(key["publicKeyMultibase"])
    return keys


def verify_only_rate(tokens: Sequence[str]) -> float:
    """Ed25519 verifications per second, one core, nothing else timed."""
    keys = key_map(tokens)
    work = []
    for token in tokens:
        decoded = decode_jws(token)
        kid = (decoded.kid or "").rsplit("#", 1)[-1]
        work.append((keys[kid], decoded.signing_input, decoded.signature))
    started = time.perf_counter()
    for key, message, signature in work:
        if not verify_signature(key, message, signature):
            raise AssertionError("workload op does not verify")
    return len(tokens) / (time.perf_counter() - started)


async def precheck_batch_costs(
    tokens: Sequence[str], size: int, threads: int
) -> tuple[float, float]:
    """Best (wall, CPU) seconds of prechecking ``size`` ops on ``threads`` threads."""
    keys = key_map(tokens)
    jobs = []
    for token in tokens[:size]:
        decoded = decode_jws(token)
        jobs.append((decoded, [keys[(decoded.kid or "").rsplit("#", 1)[-1]]]))

    pool = PrecheckPool(threads)
    await pool.run(jobs)  # starts the threads
    best = (float("inf"), 0.0)
    for _ in range(20):
        started, cpu = time.perf_counter(), time.process_time()
        await pool.run(jobs)
        best = min(best, (time.perf_counter() - started, time.process_time() - cpu))
    pool.close()
    return best


def verify_rate(tokens: Sequence[str]) -> float:
    keys = key_map(tokens)
    started = time.perf_counter()
    for token in tokens:
        decoded = decode_jws(token)
        check_cid(decoded)
        kid = decoded.kid or ""
        if not verify_signature(
            keys[kid.rsplit("#", 1)[-1]], decoded.signing_input, decoded.signature
        ):
            raise AssertionError(f"workload op does not verify: {decoded.header_cid}")
    return len(tokens) / (time.perf_counter() - started)


def batches(tokens: Sequence[str], rng: random.Random | None) -> list[list[str]]:
    out, i = [], 0
    while i < len(tokens):
        size = BATCH if rng is None else rng.randint(1, BATCH)
        out.append(list(tokens[i : i + size]))
        i += size
    return out


async def ingest_rate(
    tokens: Sequence[str], shuffle_seed: int | None, verify_threads: int | None
) -> tuple[float, int]:
    rng = None
    ordered = list(tokens)
    if shuffle_seed is not None:
        rng = random.Random(shuffle_seed)
        rng.shuffle(ordered)
    plan = batches(ordered, rng)
    relay = create_relay(config=RelayConfig(verify_threads=verify_threads))
    async with serve_on_loopback(relay.app) as url:
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
            base = await relay.store.log_length()  # the relay's own identity + profile
            started = time.perf_counter()
            for batch in plan:
                response = await client.post("/operations", json={"operations": batch})
                response.raise_for_status()
            elapsed = time.perf_counter() - started
            sequenced = await relay.store.log_length() - base
    return len(tokens) / elapsed, sequenced


async def run(n_ops: int, seed: int, repeat: int, verify_threads: int | None) -> int:
    tokens = mixed_workload(n_ops, seed=seed)
    print(f"workload: {len(tokens)} ops (seed {seed}), best of {repeat} alternating runs")
    floor = max(verify_only_rate(tokens) for _ in range(repeat))
    verify = max(verify_rate(tokens) for _ in range(repeat))
    print(f"verify only (PyNaCl Ed25519, 1 core):    {floor:10.0f} ops/s")
    print(f"decode + CID + verify (1 core):          {verify:10.0f} ops/s")
    for size in (100, 1000):
        for threads in (1, 2):
            wall, cpu = await precheck_batch_costs(tokens, size, threads)
            print(
                f"precheck of {size:4d} ops on {threads} thread(s): "
                f"wall {wall * 1e3:6.2f} ms, CPU {cpu * 1e3:6.2f} ms"
            )
    in_order = shuffled = 0.0
    ok = True
    for _ in range(repeat):  # alternate, so machine noise hits both alike
        rate, n_in = await ingest_rate(tokens, None, verify_threads)
        in_order = max(in_order, rate)
        rate, n_sh = await ingest_rate(tokens, seed, verify_threads)
        shuffled = max(shuffled, rate)
        ok = ok and n_in == n_sh == len(tokens)
    print(
        f"ingest in order, batches of {BATCH}:      {in_order:10.0f} ops/s"
        f"  ratio to verify only {in_order / floor:.2f} (target >= 0.6)"
    )
    print(
        f"ingest shuffled, batches of 1..{BATCH}:   {shuffled:10.0f} ops/s"
        f"  ratio to in order {shuffled / in_order:.2f} (target >= 0.9)"
    )
    print(f"sequenced every op in every run: {ok}")
    met = in_order >= 0.6 * floor and shuffled >= 0.9 * in_order
    print("targets met" if met else "targets missed")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="best of N alternating runs")
    parser.add_argument("--profile", action="store_true", help="cProfile the whole run")
    parser.add_argument("--verify-threads", type=int, default=None, help="default: per core")
    args = parser.parse_args()
    work = run(args.ops, args.seed, args.repeat, args.verify_threads)
    if not args.profile:
        return asyncio.run(work)
    profiler = cProfile.Profile()
    code = profiler.runcall(asyncio.run, work)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
