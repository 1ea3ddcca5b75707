"""Mesh simulation: five relays, a random peering topology and a random
partition, a random workload through random entry relays. The relays sync
by their own peering (sync-in along the topology's links): while the links
crossing the partition are cut, each side syncs as far as its own links
reach, and the job reports exactly the chains that differ; after healing and a
sync round it reports convergence."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from relay.testing.workload import mixed_workload

from .relays import Node, crossing, cut, heal, relays, sync_until_stable
from .test_convergence import converge

pytestmark = pytest.mark.spark

N_RELAYS = 5


def topology(rng: random.Random, n: int) -> list[tuple[int, int]]:
    """A random spanning tree plus random extra links."""
    edges = {(rng.randrange(i), i) for i in range(1, n)}
    edges |= {(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.3}
    return sorted(edges)


async def chains_that_differ(nodes: list[Node]) -> set[str]:
    """Ground truth from the relays themselves: op sets and served heads."""
    ops: dict[str, list[set[str]]] = {}
    kinds: dict[str, str] = {}
    for i, node in enumerate(nodes):
        for e in await node.log_tokens():
            if e["kind"] in ("identity-op", "content-op"):
                ops.setdefault(e["chainId"], [set() for _ in nodes])[i].add(e["cid"])
                kinds[e["chainId"]] = e["kind"]
    differ = set()
    for chain_id, per_relay in ops.items():
        heads = {await n.head(kinds[chain_id], chain_id) for n in nodes}
        if len(heads) > 1 or any(s != per_relay[0] for s in per_relay):
            differ.add(chain_id)
    return differ


@pytest.mark.parametrize("seed", [5])
def test_partitioned_mesh_differs_exactly_then_converges(
    spark: Any, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    edges = topology(rng, N_RELAYS)
    side = {i: rng.random() < 0.5 for i in range(N_RELAYS)}
    side[0], side[1] = True, False  # both sides non-empty
    cross = crossing(edges, side)
    tokens = mixed_workload(120, seed=seed)

    async def simulate() -> tuple[set[str], list[str], list[str]]:
        async with relays(N_RELAYS, edges) as nodes:
            cut(nodes, cross)
            for start in range(0, len(tokens), 10):
                await nodes[rng.randrange(N_RELAYS)].post(tokens[start : start + 10])
            await sync_until_stable(nodes)
            before = [str(await n.dump(tmp_path / "before")) for n in nodes]
            expected = await chains_that_differ(nodes)
            await heal(nodes, cross)
            await sync_until_stable(nodes)
            after = [str(await n.dump(tmp_path / "after")) for n in nodes]
            return expected, before, after

    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    expected, before, after = asyncio.run(simulate())
    assert expected, "the partition should leave some chains different"
    code, report = converge(spark, before, out=tmp_path)
    assert code == 1
    assert {c["chainId"] for c in report["divergentChains"]} == expected
    code, report = converge(spark, after, out=tmp_path)
    assert code == 0 and report["converged"]
