"""Gossip-out: new ops reach gossip peers in batches, never echo to their
source, and the queue is bounded and flushed on shutdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from relay.testing.workload import mixed_workload
from tests.peering.mesh import (
    assert_converged,
    in_process_mesh,
    post_all,
    shuffled,
)
from tests.support.relay_api import PAST_MS


async def test_workload_in_random_order_reaches_every_relay_by_gossip_alone(
    tmp_path: Path,
) -> None:
    tokens = mixed_workload(200, seed=1, now_ms=PAST_MS)
    async with in_process_mesh(tmp_path, gossip=True, read_through=False, sync=False) as mesh:
        await post_all(mesh.http, mesh.urls[0], shuffled(tokens, seed=7))
        await mesh.settle_gossip()
        cids = await assert_converged(mesh)
    assert len(cids) >= len(tokens)
    assert all(mesh.peering(i).gossip.lanes for i in range(3))


async def test_gossip_batches_hold_at_most_100_ops(tmp_path: Path) -> None:
    tokens = mixed_workload(250, seed=2, now_ms=PAST_MS)
    async with in_process_mesh(tmp_path, 2, gossip=True, read_through=False, sync=False) as mesh:
        batches: list[int] = []
        client = mesh.peering(0).client
        original = client.submit_operations

        async def spy(
            peer_url: str, operations: Sequence[str], headers: Mapping[str, str] | None = None
        ) -> None:
            batches.append(len(operations))
            await original(peer_url, operations, headers)

        client.submit_operations = spy  # type: ignore[method-assign]
        # one ingest call of 250 ops -> at least three pushes
        await mesh.relays[0].ingest(tokens)
        await mesh.settle_gossip()
        await assert_converged(mesh)
    assert batches and max(batches) <= 100 and sum(batches) >= len(tokens)


async def test_an_op_from_a_peer_is_not_echoed_back_to_it(tmp_path: Path) -> None:
    tokens = mixed_workload(40, seed=3, now_ms=PAST_MS)
    async with in_process_mesh(tmp_path, 2, gossip=True, read_through=False, sync=False) as mesh:
        await mesh.settle_gossip()  # relay identities announced at start
        lane_back = mesh.peering(1).gossip.lanes[mesh.urls[0]]
        before = lane_back.delivered
        # relay B ingests ops "from" A (as sync/read-through do): no push to A
        await mesh.relays[1].ingest(tokens, source=mesh.urls[0])
        await mesh.settle_gossip()
        assert lane_back.delivered == before
        # ...but ops B learns from elsewhere still go to A
        await mesh.relays[1].ingest(mixed_workload(20, seed=4, now_ms=PAST_MS))
        await mesh.settle_gossip()
        assert lane_back.delivered > before


async def test_duplicates_are_not_re_gossiped(tmp_path: Path) -> None:
    tokens = mixed_workload(40, seed=5, now_ms=PAST_MS)
    async with in_process_mesh(tmp_path, 2, gossip=True, read_through=False, sync=False) as mesh:
        await mesh.relays[0].ingest(tokens)
        await mesh.settle_gossip()
        lane = mesh.peering(0).gossip.lanes[mesh.urls[1]]
        before = lane.delivered
        await mesh.relays[0].ingest(tokens)  # all duplicate now
        await mesh.settle_gossip()
        assert lane.delivered == before


async def test_queue_is_bounded_and_stop_is_prompt_when_the_peer_is_down(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from tests.peering.mesh import FAST

    cfg = replace(
        FAST, gossip_queue_max=50, gossip_flush_timeout_s=0.2, backoff_base_s=5.0, backoff_max_s=5.0
    )
    tokens = mixed_workload(200, seed=6, now_ms=PAST_MS)
    async with in_process_mesh(
        tmp_path, 2, config=cfg, gossip=True, read_through=False, sync=False
    ) as mesh:
        mesh.transport.down(mesh.urls[1])
        results = await mesh.relays[0].ingest(tokens)  # ingestion is not blocked
        assert all(r.status.value == "new" for r in results)
        lane = mesh.peering(0).gossip.lanes[mesh.urls[1]]
        assert lane.backlog <= 50
        assert lane.dropped >= len(tokens) - 50 - 100
        import time

        started = time.monotonic()
        await mesh.relays[0].stop()
        assert time.monotonic() - started < 2.0
