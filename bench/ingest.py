"""Ingest benchmark (issue 2): relay throughput next to the raw verify rate.

Not a test; CI does not run it. Usage::

    .venv/bin/python bench/ingest.py [--ops 10000] [--seed 1] [--profile]

1. Generate >= N signed ops of every kind (``mixed_workload``).
2. Measure, single core, the rate of decode + CID check + Ed25519 verify of
   the same ops with the right key (a key map built from the workload's
   identity ops): the floor cost any relay pays per op.
3. Ingest through hypercorn on loopback (one httpx connection, sequential
   requests) into a fresh memory relay: in causal order in batches of 100,
   then shuffled (random order, random batch sizes 1..100). Both runs must
   sequence every op (checked against the relay's log length).

Targets: in-order >= 0.4 x verify rate; shuffled >= 0.8 x in-order rate.
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

from relay import create_relay
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


async def ingest_rate(tokens: Sequence[str], shuffle_seed: int | None) -> tuple[float, int]:
    rng = None
    ordered = list(tokens)
    if shuffle_seed is not None:
        rng = random.Random(shuffle_seed)
        rng.shuffle(ordered)
    plan = batches(ordered, rng)
    relay = create_relay()
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


async def run(n_ops: int, seed: int, repeat: int) -> int:
    tokens = mixed_workload(n_ops, seed=seed)
    print(f"workload: {len(tokens)} ops (seed {seed}), best of {repeat} alternating runs")
    verify = max(verify_rate(tokens) for _ in range(repeat))
    print(f"verify (decode + CID + Ed25519, 1 core): {verify:10.0f} ops/s")
    in_order = shuffled = 0.0
    ok = True
    for _ in range(repeat):  # alternate, so machine noise hits both alike
        rate, n_in = await ingest_rate(tokens, None)
        in_order = max(in_order, rate)
        rate, n_sh = await ingest_rate(tokens, seed)
        shuffled = max(shuffled, rate)
        ok = ok and n_in == n_sh == len(tokens)
    print(
        f"ingest in order, batches of {BATCH}:      {in_order:10.0f} ops/s"
        f"  ratio to verify {in_order / verify:.2f} (target >= 0.40)"
    )
    print(
        f"ingest shuffled, batches of 1..{BATCH}:   {shuffled:10.0f} ops/s"
        f"  ratio to in-order {shuffled / in_order:.2f} (target >= 0.80)"
    )
    print(f"sequenced every op in every run: {ok}")
    met = in_order >= 0.4 * verify and shuffled >= 0.8 * in_order
    print("targets met" if met else "targets missed")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="best of N alternating runs")
    parser.add_argument("--profile", action="store_true", help="cProfile the whole run")
    args = parser.parse_args()
    if not args.profile:
        return asyncio.run(run(args.ops, args.seed, args.repeat))
    profiler = cProfile.Profile()
    code = profiler.runcall(asyncio.run, run(args.ops, args.seed, args.repeat))
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
