"""Benchmark the convergence job (issue 6).

Generates (and caches under bench/out/) a set of distinct signed ops, then
composes three relays' dumps from overlapping subsets (each relay holds ~90%
of the ops) until they total ``--entries`` log entries. Runs the job on
local[2] without and with --verify and prints entries/s for each, next to the
single-core decode + CID + Ed25519 verify rate of the same ops.

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
        for k in decode_jws(token).payload.get("controllerKeys", []) or []:
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    paths, tokens = make_dumps(args.entries)
    entries = 0
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            entries += sum(1 for _ in fh)
    rate1 = single_core_rate(tokens)
    print(f"dumps: {len(paths)} relays, {entries} entries, {len(tokens)} distinct ops")

    from spark.convergence import get_session, run_convergence

    spark = get_session(args.master, 8)
    spark.sparkContext.setLogLevel("ERROR")
    results = {}
    for flags in ([], ["--verify"]):
        t0 = time.perf_counter()
        code = run_convergence([*flags, "--quiet", "--max-listed", "10", *paths], spark=spark)
        elapsed = time.perf_counter() - t0
        results[" ".join(flags) or "plain"] = entries / elapsed
        print(f"job {' '.join(flags) or '(no --verify)'}: exit {code}, {elapsed:.1f}s, "
              f"{entries / elapsed:,.0f} entries/s")
    print(f"single-core decode+CID+Ed25519: {rate1:,.0f} ops/s")
    print(f"target plain >= 20,000 entries/s: {results['plain']:,.0f}")
    print(f"target --verify >= 0.4 x 2 x {rate1:,.0f} = {0.8 * rate1:,.0f}: "
          f"{results['--verify']:,.0f}")
    spark.stop()


if __name__ == "__main__":
    main()
