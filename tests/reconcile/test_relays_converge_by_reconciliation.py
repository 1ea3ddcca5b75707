"""Relays converge by reconciliation alone (no gossip, no log sync): after
a partition in which each made conflicting forks, one reconcile run per
pair leaves every relay with the same ops and the same heads."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.testing.workload import WorkloadBuilder
from tests.peering.mesh import assert_converged, in_process_mesh
from tests.support.backends import selected_backends
from tests.support.relay_api import PAST_MS

OFF = {"gossip": False, "read_through": False, "sync": False}


@pytest.mark.parametrize("backend", selected_backends())
async def test_forks_made_apart_converge_by_reconciliation_alone(
    tmp_path: Path, backend: str
) -> None:
    b = WorkloadBuilder(seed=41, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    b.beacon(bob)
    witnesses = [b.identity() for _ in range(3)]
    chain = b.content_create(alice)
    b.content_update(chain)
    fork_point = chain.ops[-1]
    shared = list(b.tokens)
    async with in_process_mesh(tmp_path, 3, backend=backend, **OFF) as mesh:
        for relay in mesh.relays:
            await relay.ingest(shared)
        for i, relay in enumerate(mesh.relays):
            start = len(b.tokens)
            b.content_update(chain, parent=fork_point)
            b.beacon(witnesses[i])  # one beacon per DID: a late older one is not logged
            b.countersign(witnesses[i], fork_point[0])
            if i == 1:
                b.rotate(alice)
            await relay.ingest(b.tokens[start:])
        a, others = mesh.relays[0], mesh.urls[1:]
        for url in others:
            report = await a.reconcile(url)
            assert report.ok, report.error
            assert report.need and report.have
        # c's fork op waited for the rotation, which reached c only in a's
        # push: it is sequenced there now, so further passes bring it round
        for _ in range(3):
            reports = [await a.reconcile(url) for url in others]
            assert all(r.ok for r in reports)
            if all(r.have == r.need == 0 for r in reports):
                break
        await assert_converged(mesh)
        again = await mesh.relays[1].reconcile(mesh.urls[2])
        assert again.ok and (again.have, again.need, again.rounds) == (0, 0, 1)
