"""Benchmark the convergence job (issue 6).

Generates (and caches under bench/out/) a set of distinct signed ops, then
composes three relays' dumps from overlapping subsets (each relay holds ~90%
of the ops) until they total ``--entries`` log entries. Runs the job on
local[2] without and with --verify and prints entries/s for each (timed from
reading the dumps through the report; dump generation and Spark start-up are
not timed, and the JVM is warmed up on a small sample first), next to the
single-core decode + CID + Ed25519 verify rate of the same ops measured
before and after the jobs, and each ratio to its target.

    .venv/bin/python bench/converge.py --entries 1000000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relay.protocol import (  # noqa: E402
    check_cid,
    content_id_from_genesis_cid,
    decode_jws,
    decode_multikey,
    did_from_genesis_cid,
    split_kid,
    verify_signature,
)
from relay.rules.classify import classify  # noqa: E402
from relay.testing.workload import mixed_workload  # noqa: E402

OUT = ROOT / "bench" / "out"
RELAYS = ("alpha", "beta", "gamma")
HOLD_PERCENT = 90
WARMUP_LINES = 2000


def log_entries(tokens: list[str]) -> list[dict[str, str]]:
    """Log entries (cid, jwsToken, kind, chainId) for tokens in causal order."""
    content_of: dict[str, str] = {}
    entries = []
    for token in tokens:
        d = decode_jws(token)
        kind = classify(d.typ)
        cid, p = str(d.header_cid), d.payload
        prev = p.get("previousOperationCID")
        if kind == "identity-op":
            chain = did_from_genesis_cid(cid) if prev is None else str(split_kid(str(d.kid))[0])
        elif kind == "content-op":
            chain = content_id_from_genesis_cid(cid) if prev is None else content_of[str(prev)]
            content_of[cid] = chain
        elif kind == "countersign":
            chain = str(p["targetCID"])
        else:
            chain = str(p["did"])
        entries.append({"cid": cid, "jwsToken": token, "kind": str(kind), "chainId": chain})
    return entries


def holds(relay: str, cid: str) -> bool:
    return hashlib.sha256(f"{relay}/{cid}".encode()).digest()[0] % 100 < HOLD_PERCENT


def make_dumps(total: int) -> tuple[list[str], list[str]]:
    distinct = total * 100 // (len(RELAYS) * HOLD_PERCENT) + 1
    cache = OUT / f"dumps-{total}"
    paths = [str(cache / f"{r}.jsonl") for r in RELAYS]
    tokens_path = cache / "tokens.txt"
    if all(os.path.exists(p) for p in paths) and tokens_path.exists():
        return paths, tokens_path.read_text().split()
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tokens = mixed_workload(distinct, seed=6)
    entries = log_entries(tokens)
    print(f"generated {len(tokens)} distinct ops in {time.perf_counter() - t0:.1f}s")
    for relay, path in zip(RELAYS, paths, strict=True):
        with open(path, "w", encoding="utf-8") as fh:
            for e in entries:
                if holds(relay, e["cid"]):
                    fh.write(json.dumps(e, separators=(",", ":")) + "\n")
    tokens_path.write_text("\n".join(tokens))
    return paths, tokens


def single_core_rate(tokens: list[str], sample: int = 20000) -> float:
    """decode + canonical CID + Ed25519 verify per second on one core."""
    keys: dict[str, bytes] = {}
    for token in tokens:
        controller_keys: Any = decode_jws(token).payload.get("controllerKeys") or []
        for k in controller_keys:
            keys[k["id"]] = decode_multikey(k["publicKeyMultibase"])
    ops = tokens[:sample]
    t0 = time.perf_counter()
    for token in ops:
        d = decode_jws(token)
        check_cid(d)
        key = keys[split_kid(str(d.kid))[1]]
        if not verify_signature(key, d.signing_input, d.signature):
            raise AssertionError("bad signature in the benchmark workload")
    return len(ops) / (time.perf_counter() - t0)


def warmup_dumps(paths: list[str]) -> list[str]:
    """The first ``WARMUP_LINES`` entries of each dump, for the warm-up run."""
    out = []
    for path in paths:
        target = OUT / "warmup" / Path(path).name
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(path, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as dst:
            for _, line in zip(range(WARMUP_LINES), src, strict=False):
                dst.write(line)
        out.append(str(target))
    return out


def run_job(spark: Any, flags: list[str], paths: list[str]) -> tuple[int, float, dict[str, Any]]:
    """Run the job once (reading the dumps through the report); time it."""
    from spark.convergence import run_convergence

    out = OUT / "converge-report.json"
    t0 = time.perf_counter()
    code = run_convergence(
        [*flags, "--quiet", "--max-listed", "10", "--out", str(out), *paths], spark=spark
    )
    elapsed = time.perf_counter() - t0
    return code, elapsed, json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument(
        "--only",
        choices=("plain", "verify"),
        default=None,
        help="run one of the two jobs (for profiling; prints no target ratios)",
    )
    args = parser.parse_args()
    paths, tokens = make_dumps(args.entries)
    entries = 0
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            entries += sum(1 for _ in fh)
    print(f"dumps: {len(paths)} relays, {entries:,} entries, {len(tokens):,} distinct ops")
    rate_before = single_core_rate(tokens)

    from spark.convergence import get_session

    quiet = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    spark = get_session(args.master, args.shuffle_partitions, quiet)
    spark.sparkContext.setLogLevel("ERROR")
    # Warm the JVM (class loading, JIT of Spark's planner and codegen) on a
    # small sample first, untimed, like the session start-up above.
    sample = warmup_dumps(paths)
    partitions = ["--shuffle-partitions", str(args.shuffle_partitions)]
    for flags in ([], ["--verify"]):
        code, elapsed, _ = run_job(spark, [*flags, *partitions], sample)
        print(
            f"warm-up {' '.join(flags) or 'plain'} on a 3 x {WARMUP_LINES}-entry sample:"
            f" {elapsed:.1f}s (untimed)"
        )
    rates = {}
    runs: list[list[str]] = [[], ["--verify"]]
    if args.only:
        runs = [[]] if args.only == "plain" else [["--verify"]]
    for flags in runs:
        code, elapsed, report = run_job(spark, [*flags, *partitions], paths)
        name = "--verify" if "--verify" in flags else "plain"
        rates[name] = entries / elapsed
        invalid = report.get("invalidOps", {}).get("total", "-")
        print(
            f"job {name:>8} on {args.master}: exit {code} (relays hold ~{HOLD_PERCENT}% each,"
            f" so 1 = diverged is expected), {elapsed:.1f}s, {rates[name]:,.0f} entries/s;"
            f" partial ops {report['partialOps']['total']:,}, invalid ops {invalid}"
        )
    spark.stop()
    if args.only:
        return
    rate_after = single_core_rate(tokens)
    # The stricter (higher) of the two single-core measurements sets the target.
    rate1 = max(rate_before, rate_after)
    print(
        f"single-core decode+CID+Ed25519: {rate_before:,.0f} ops/s before the jobs,"
        f" {rate_after:,.0f} after; target uses {rate1:,.0f}"
    )
    plain, verify = rates["plain"], rates["--verify"]
    print(
        f"without --verify: {plain:,.0f} entries/s vs target 20,000:"
        f" ratio {plain / 20_000:.2f} ({'met' if plain >= 20_000 else 'MISSED'})"
    )
    target = 0.4 * 2 * rate1
    verdict = "met" if verify >= target else "MISSED"
    print(
        f"with --verify:    {verify:,.0f} entries/s vs target 0.4 x 2 x {rate1:,.0f} ="
        f" {target:,.0f}: ratio {verify / target:.2f} ({verdict})"
    )


if __name__ == "__main__":
    main()
