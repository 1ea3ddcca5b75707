"""Benchmark a large mesh: rendezvous fan-out against direct push (issue 15).

For each size (default 16, 32 and 64 relays) runs the same seeded scenario
(``relay.testing.mesh_scenario``: random entry relays, a random partition,
random relays down while ops flow, then healing by reconciliation) once
with fan-out and once with direct push to every peer, in one process over
the in-process ASGI transport on memory stores. Prints side by side:

- origin pushes per op (mean / max) and the target ceil(log2 P) + 1;
- max per-relay pushes per op (mean over ops / max);
- delivery latency in rounds (hop depth of first arrival, mean / max);
- (relay, op) pairs delivered by gossip before healing vs repaired after,
  the share gossip delivered in each phase, and what reconciliation itself
  sequenced and pushed;
- convergence of every relay's dump, from the Spark job on local[2];

then PASS/FAIL per target (origin pushes per op <= ceil(log2 P) + 1 for
every op; 100% convergence after healing). Direct push is the baseline: it
fails the push target by design.

A build without fan-out (``PeeringConfig`` has no ``fanout_direct_max``)
runs today's gossip only and says so.

    .venv/bin/python -m bench.mesh                 # 16, 32, 64 relays
    .venv/bin/python -m bench.mesh --sizes 16 --groups 1
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relay.testing.mesh_scenario import (  # noqa: E402
    RunResult,
    Scenario,
    converge_dumps,
    run_scenario,
)
from relay.testing.mesh_sim import has_discovery, has_fanout  # noqa: E402
from relay.testing.mesh_stats import push_bound  # noqa: E402

OUT = ROOT / "bench" / "out" / "mesh"


def row(name: str, r: RunResult, converged: bool) -> list[str]:
    s = r.stats
    return [
        name,
        f"{s.origin_mean:.1f} / {s.origin_max}",
        f"{s.per_relay_max_mean:.1f} / {s.per_relay_max}",
        f"{s.total_mean:.0f}",
        f"{s.latency_mean:.2f} / {s.latency_max}",
        f"{r.gossip_pairs} / {r.repaired_pairs}",
        " / ".join(f"{held / max(want, 1):.0%}" for held, want in r.gossip_by_phase),
        f"{r.reconcile_sequenced} / {r.reconcile_pushed} ({r.reconcile_runs} runs)",
        "converged" if converged else "DIVERGED",
        f"{r.seconds:.0f}s",
    ]


HEADER = [
    "mode",
    "origin pushes/op mean/max",
    "max per-relay pushes/op mean/max",
    "all pushes/op",
    "latency rounds mean/max",
    "pairs gossip / repaired",
    "by gossip: healthy / partitioned / down",
    "reconcile sequenced / pushed",
    "Spark",
    "time",
]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [HEADER, *rows]]
    return "\n".join(lines)


def targets(name: str, r: RunResult, converged: bool) -> list[str]:
    lo, hi = min(r.peer_counts), max(r.peer_counts)
    peers = f"P = {lo}" if lo == hi else f"P = {lo}..{hi}"
    bound = push_bound(hi) if lo == hi else f"{push_bound(lo)}..{push_bound(hi)}"
    push_ok = r.stats.origin_over_bound == 0
    complete = r.gossip_pairs + r.repaired_pairs == r.expected_pairs
    return [
        f"  {name}: origin pushes per op <= ceil(log2 P)+1 = {bound} ({peers}, per origin):"
        f" {'PASS' if push_ok else 'FAIL'} (max {r.stats.origin_max},"
        f" {r.stats.origin_over_bound} of {r.ops} ops over)",
        f"  {name}: 100% convergence after healing (Spark job on {len(r.dumps)} dumps):"
        f" {'PASS' if converged and complete else 'FAIL'}"
        f" ({r.gossip_pairs + r.repaired_pairs} of {r.expected_pairs} (relay, op) pairs held)",
    ]


def run_size(spark: Any, n: int, args: argparse.Namespace) -> None:
    modes = [("fan-out", True), ("direct", False)] if has_fanout() else [("gossip", False)]
    rows, checks = [], []
    for name, fanout in modes:
        scenario = Scenario(
            n, fanout, args.groups, args.degree, args.fail, args.seed, args.discovery
        )
        out = OUT / f"{n}-{name}"
        shutil.rmtree(out, ignore_errors=True)
        result = asyncio.run(run_scenario(scenario, out))
        code, report = converge_dumps(spark, result.dumps, out)
        converged = code == 0 and bool(report.get("converged"))
        rows.append(row(name, result, converged))
        checks += targets(name, result, converged)
        if result.reconcile_errors:
            checks.append(f"  {name}: reconcile errors: {result.reconcile_errors[:3]}")
    ops = f"{args.groups * 3} groups of ~20 ops"
    topo = "full mesh" if args.degree is None else f"random, ~{args.degree} peers each"
    if args.discovery is not None:
        topo += ", then peer discovery"
    print(f"\n{n} relays ({topo}; {ops}; {args.fail:.0%} down in phase 3; seed {args.seed})")
    print(table(rows))
    print("\n".join(checks))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="16,32,64")
    parser.add_argument("--groups", type=int, default=1, help="workload groups per phase")
    parser.add_argument("--degree", type=int, default=None, help="peers per relay (default all)")
    parser.add_argument("--fail", type=float, default=0.15, help="fraction of relays down")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--discovery",
        type=float,
        default=None,
        metavar="REFRESH_S",
        help="with --degree: let the relays learn peers of peers first (fan-out builds)",
    )
    args = parser.parse_args()
    if args.discovery is not None and not has_discovery():
        parser.error("--discovery: this build has no peer discovery")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress in a log
    # The faults are deliberate: the relays' backoff warnings would drown the table.
    logging.getLogger("dfos_relay").setLevel(logging.CRITICAL)
    if not has_fanout():
        print("this build has no rendezvous fan-out (PeeringConfig.fanout_direct_max):"
              " running today's gossip (every relay re-gossips to every peer) only")  # fmt: skip

    from spark.convergence import get_session

    quiet = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    spark = get_session("local[2]", 4, quiet)
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter()
    for n in (int(x) for x in args.sizes.split(",")):
        run_size(spark, n, args)
    spark.stop()
    print(f"\ntotal {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
