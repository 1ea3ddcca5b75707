"""The mesh simulation harness (``relay.testing.mesh_sim``, issue 15) on a
small mesh: a random sparse topology, random entry relays, a partition and
relays down while ops flow, then healing by reconciliation. Whether the
relays converged is the Spark job's verdict over their dumps; the test only
checks what the harness recorded about how the ops travelled."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from relay.testing.mesh_scenario import Scenario, converge_dumps, run_scenario
from relay.testing.mesh_sim import has_fanout
from relay.testing.mesh_stats import Push, push_bound, push_stats

pytestmark = pytest.mark.spark


def test_partitioned_mesh_heals_and_the_spark_job_sees_it_converge(
    spark: Any, tmp_path: Path
) -> None:
    scenario = Scenario(8, fanout=False, groups_per_phase=1, degree=3, seed=3)
    unhealed = tmp_path / "before"
    result = asyncio.run(run_scenario(scenario, tmp_path / "after", before=unhealed))

    assert result.ops == 60 and len(result.dumps) == 8
    # gossip reached relays beyond the entry ones, in several hops (sparse mesh)
    assert result.stats.gossip_pairs > 0 and result.stats.latency_max >= 2
    # the partition and the relays taken down left holes that only healing filled
    assert result.gossip_pairs < result.expected_pairs
    assert result.repaired_pairs == result.expected_pairs - result.gossip_pairs
    assert result.reconcile_sequenced + result.reconcile_pushed > 0
    assert not result.reconcile_errors
    code, report = converge_dumps(spark, sorted(map(str, unhealed.iterdir())), tmp_path)
    assert code == 1 and not report["converged"]
    code, report = converge_dumps(spark, result.dumps, tmp_path)
    assert code == 0 and report["converged"]


@pytest.mark.skipif(not has_fanout(), reason="this build has no rendezvous fan-out")
def test_fan_out_keeps_origin_pushes_within_the_bound_and_the_mesh_heals(
    spark: Any, tmp_path: Path
) -> None:
    scenario = Scenario(10, fanout=True, groups_per_phase=1, seed=5)  # full mesh: P = 9 > 4
    result = asyncio.run(run_scenario(scenario, tmp_path / "after"))

    assert result.stats.origin_max <= push_bound(9) and result.stats.origin_over_bound == 0
    assert result.gossip_pairs + result.repaired_pairs == result.expected_pairs
    code, report = converge_dumps(spark, result.dumps, tmp_path)
    assert code == 0 and report["converged"]


def _push(sender: int, receiver: int, answer: str = "new", ok: bool = True) -> Push:
    return Push(sender, receiver, "gossip", ok, {"c1": answer})


def test_push_stats_follow_first_arrivals_back_to_the_origin() -> None:
    pushes = [
        _push(0, 1),
        _push(0, 2),
        _push(0, 3, "unreachable", ok=False),  # attempted: still costs the origin
        _push(1, 4),
        _push(2, 4, "duplicate"),  # second copy: not the first arrival
        _push(4, 5, "missing-previous"),  # parked, sequenced from this copy later
        _push(5, 0, "duplicate"),  # echo back to the origin
        Push(1, 6, "heal", True, {"c1": "new"}),  # reconciliation, not gossip
    ]
    stats = push_stats(pushes, {"c1": 0}, [3, 2, 2, 1, 3, 2, 1])
    assert (stats.origin_mean, stats.origin_max) == (3, 3)
    assert stats.origin_over_bound == 0  # ceil(log2 3) + 1 = 3
    assert stats.per_relay_max == 3 and stats.total_mean == 7
    assert (stats.gossip_pairs, stats.latency_max) == (4, 3)  # 1, 2 @1; 4 @2; 5 @3
    assert stats.latency_mean == (1 + 1 + 2 + 3) / 4
