"""Partition: relays ingest different conflicting forks while disconnected,
then reconnect and sync; all converge to the same heads (WEB-RELAY.md
"Convergence": deterministic head selection)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from relay.testing.workload import WorkloadBuilder
from tests.peering.mesh import assert_converged, in_process_mesh
from tests.support.relay_api import PAST_MS


@pytest.mark.parametrize("behavior", ["gossip+sync", "sync"])
async def test_conflicting_forks_made_apart_converge_after_reconnect(
    tmp_path: Path, behavior: str
) -> None:
    gossip = behavior != "sync"
    b = WorkloadBuilder(seed=31, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    b.content_update(chain)
    fork_point = chain.ops[-1]
    shared = list(b.tokens)
    async with in_process_mesh(tmp_path, 3, gossip=gossip, read_through=False, sync=True) as mesh:
        for relay in mesh.relays:
            await relay.ingest(shared)
        for url in mesh.urls:
            mesh.transport.down(url)
        branch_heads = []
        for i, relay in enumerate(mesh.relays):
            start = len(b.tokens)
            first = b.content_update(chain, parent=fork_point)
            b.content_update(chain, parent=(first, chain.ops[-1][1]))
            if i == 2:
                b.rotate(alice)  # identity diverges too (after the others signed)
            branch_heads.append(chain.ops[-1][0])
            results = await relay.ingest(b.tokens[start:])
            assert all(r.status.value == "new" for r in results)
        # while apart, each relay's content head is its own branch
        for relay, head in zip(mesh.relays, branch_heads, strict=True):
            record = await relay.store.get_chain(chain.content_id)
            assert record is not None and record.head_cid == head
        if gossip:
            await mesh.settle_gossip()  # gives up (sync will repair)
        for url in mesh.urls:
            mesh.transport.up(url)
        await asyncio.sleep(0.1)  # let the (short) backoff lapse
        for _ in range(2):
            for relay in mesh.relays:
                await relay.sync_from_peers()
        if gossip:
            await mesh.settle_gossip()
        await assert_converged(mesh)
        head = (await mesh.relays[0].store.get_chain(chain.content_id)).head_cid  # type: ignore[union-attr]
        assert head in branch_heads
