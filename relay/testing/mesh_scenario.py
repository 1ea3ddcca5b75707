"""One mesh simulation run: topology, workload, faults, healing, dumps.

``run_scenario`` drives a ``SimMesh`` through three phases of client writes
(each a few signed workload groups POSTed to random entry relays):

1. healthy;
2. a random partition into two sides (links across are cut);
3. random relays taken down (``transport.down``) while ops flow: with
   fan-out these are the coordinators some ops rank first.

Then it heals (everything up, partition gone) and reconciles
(``relay.reconcile(peer)``, both directions) along a random spanning tree of
the topology, leaves to root then root to leaves, until a pass moves
nothing. It records what gossip delivered before healing and what
reconciliation repaired, and dumps every relay's log for the Spark
convergence job (``converge_dumps``); convergence is never decided here.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay.protocol import decode_jws
from relay.testing.workload import mixed_workload

from .mesh_sim import SimMesh, sim_config, sim_mesh
from .mesh_stats import PushStats, held_pairs, push_stats

Edge = tuple[int, int]


def topology(rng: random.Random, n: int, degree: int | None) -> list[list[int]]:
    """Random symmetric peer sets: a random spanning tree plus random links
    up to about ``degree`` peers each. ``None``: every relay peers with
    every other (the mesh as peer discovery leaves it)."""
    if degree is None or degree >= n - 1:
        return [[j for j in range(n) if j != i] for i in range(n)]
    order = list(range(n))
    rng.shuffle(order)
    edges = {frozenset((order[i], order[rng.randrange(i)])) for i in range(1, n)}
    want = n * degree // 2
    while len(edges) < want:
        a, b = rng.sample(range(n), 2)
        edges.add(frozenset((a, b)))
    peers: list[list[int]] = [[] for _ in range(n)]
    for edge in edges:
        a, b = sorted(edge)
        peers[a].append(b)
        peers[b].append(a)
    return [sorted(p) for p in peers]


def spanning_tree(rng: random.Random, peers: list[list[int]]) -> list[Edge]:
    """(parent, child) edges of a BFS tree from a random root, in BFS order."""
    root = rng.randrange(len(peers))
    seen, frontier, edges = {root}, [root], []
    while frontier:
        nxt = []
        for a in frontier:
            for b in sorted(peers[a], key=lambda _: rng.random()):
                if b not in seen:
                    seen.add(b)
                    edges.append((a, b))
                    nxt.append(b)
        frontier = nxt
    if len(seen) != len(peers):
        raise ValueError("the topology is not connected")
    return edges


@dataclass(frozen=True, slots=True)
class Scenario:
    relays: int
    fanout: bool
    groups_per_phase: int = 2  # one group = ~17 signed ops of every kind
    degree: int | None = None  # None: full mesh
    fail_fraction: float = 0.15  # relays down in phase 3
    seed: int = 0
    discovery_refresh_s: float | None = None  # learn peers of peers first (fan-out builds)


@dataclass
class RunResult:
    scenario: Scenario
    stats: PushStats
    ops: int
    expected_pairs: int  # relays x ops
    gossip_pairs: int  # held before healing (entry relays included)
    repaired_pairs: int  # held after healing, not before
    reconcile_runs: int
    reconcile_sequenced: int  # ops pulled and newly sequenced by reconciliation
    reconcile_pushed: int  # ops pushed to a peer that lacked them
    reconcile_errors: list[str] = field(default_factory=list)
    peer_counts: list[int] = field(default_factory=list)  # gossip peers, after discovery
    gossip_by_phase: list[tuple[int, int]] = field(default_factory=list)  # (held, expected)
    dumps: list[str] = field(default_factory=list)
    seconds: float = 0.0


def groups(count: int, seed: int) -> list[list[str]]:
    """``count`` independent workload groups (fresh identities each)."""
    return [mixed_workload(1, seed=seed * 10_000 + g) for g in range(count)]


async def _write_phase(
    mesh: SimMesh,
    rng: random.Random,
    batch: list[list[str]],
    up: list[int],
    origins: dict[str, int],
) -> None:
    """Each group to one random live entry relay, concurrently; then settle."""
    posts = []
    for group in batch:
        entry = rng.choice(up)
        for token in group:
            origins[str(decode_jws(token).header_cid)] = entry
        posts.append(mesh.post(entry, group))
    await asyncio.gather(*posts)
    await mesh.settle()


async def _heal(mesh: SimMesh, tree: list[Edge], result: RunResult) -> None:
    mesh.recorder.side = None
    mesh.recorder.phase = "heal"
    await asyncio.sleep(0.1)  # past the backoff the faults left (sim_config: 0.05 s max)
    for _ in range(6):
        moved = 0
        for a, b in [*reversed(tree), *tree]:
            report = await mesh.relays[b].reconcile(mesh.urls[a])
            result.reconcile_runs += 1
            if report.error:
                result.reconcile_errors.append(f"r{b}->r{a}: {report.error}")
            result.reconcile_sequenced += report.sequenced
            result.reconcile_pushed += report.pushed
            moved += report.sequenced + report.pushed
        await mesh.settle()
        if moved == 0:
            return


PHASES = ("healthy", "partitioned", "relays down")


async def _three_phases(
    mesh: SimMesh, rng: random.Random, work: list[list[str]], fail: float
) -> list[dict[str, int]]:
    """Client writes in each phase; op CID -> entry relay, per phase."""
    everyone = list(range(len(mesh.relays)))
    origins: list[dict[str, int]] = [{}, {}, {}]
    await _write_phase(mesh, rng, work[0::3], everyone, origins[0])
    side = {i: rng.random() < 0.5 for i in everyone}
    side[0], side[1] = True, False  # both sides non-empty
    mesh.recorder.side = side
    await _write_phase(mesh, rng, work[1::3], everyone, origins[1])
    mesh.recorder.side = None
    down = rng.sample(everyone, max(1, round(len(everyone) * fail)))
    for i in down:
        mesh.transport.down(mesh.urls[i])
    up = [i for i in everyone if i not in down]
    await _write_phase(mesh, rng, work[2::3], up, origins[2])
    for i in down:  # back up, but gossip already gave up on them
        mesh.transport.up(mesh.urls[i])
    return origins


async def run_scenario(s: Scenario, out: Path, before: Path | None = None) -> RunResult:
    """Run ``s``; dump every relay's log under ``out`` (and, before healing,
    under ``before`` when given: the control that must not converge)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    rng = random.Random(s.seed)
    peers = topology(rng, s.relays, s.degree)
    work = groups(3 * s.groups_per_phase, s.seed)
    config = sim_config(s.fanout, s.discovery_refresh_s)
    async with sim_mesh(peers, config) as mesh:
        counts = [len(p) for p in peers]
        if s.discovery_refresh_s is not None:
            await mesh.discovered()
            mesh.recorder.pushes.clear()  # announcements to learned peers
        by_phase = await _three_phases(mesh, rng, work, s.fail_fraction)
        origins = {cid: entry for phase in by_phase for cid, entry in phase.items()}
        held = await mesh.holdings()
        if s.discovery_refresh_s is not None:  # as the origins saw it while ops flowed
            counts = mesh.lane_counts()
        stats = push_stats(mesh.recorder.pushes, origins, counts)
        gossip = held_pairs(held, origins)
        result = RunResult(s, stats, len(origins), len(origins) * s.relays, gossip, 0, 0, 0, 0)
        result.peer_counts = counts
        result.gossip_by_phase = [
            (held_pairs(held, phase), len(phase) * s.relays) for phase in by_phase
        ]
        if before is not None:
            await mesh.dump(before)
        await _heal(mesh, spanning_tree(rng, peers), result)
        result.repaired_pairs = held_pairs(await mesh.holdings(), origins) - gossip
        result.dumps = await mesh.dump(out)
    result.seconds = loop.time() - started
    return result


def converge_dumps(spark: Any, dumps: list[str], out: Path) -> tuple[int, dict[str, Any]]:
    """The Spark convergence job over ``dumps``: (exit code, report).
    Exit 0: every relay holds the same ops and heads (see spark/)."""
    import json

    from spark.convergence import run_convergence

    report = out / "converge-report.json"
    code = run_convergence(["--quiet", "--out", str(report), *dumps], spark=spark)
    return code, json.loads(report.read_text()) if report.exists() else {}
