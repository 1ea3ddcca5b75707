"""Reconciliation over a scope (``POST /sync/negentropy?scope=``) runs on
the scope's effective item set on both sides: a consumer that holds nothing
pulls exactly the intent and its closure, and nothing outside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.scope import parse_scope
from tests.peering.mesh import in_process_mesh
from tests.support.backends import selected_backends

from .world import build_world, expected_closure

OFF = {"gossip": False, "read_through": False, "sync": False}


async def kinds_and_chains(relay: object) -> set[tuple[str, str]]:
    store = relay.store  # type: ignore[attr-defined]
    head = await store.log_length()
    return {(e.kind, e.chain_id) for e in await store.read_seq_range(0, head, 10_000)}


@pytest.mark.parametrize("backend", selected_backends())
async def test_a_scoped_pull_brings_exactly_the_closure(tmp_path: Path, backend: str) -> None:
    world = build_world(seed=31)
    scope = parse_scope(world.chain.content_id)
    async with in_process_mesh(tmp_path, 2, backend=backend, **OFF) as mesh:
        serving, consumer = mesh.relays
        await serving.ingest(world.tokens)
        before = await kinds_and_chains(consumer)  # the consumer relay's own identity
        report = await consumer.reconcile(mesh.urls[0], "pull", scope=scope)
        assert report.ok, report.error
        assert report.scope_id == scope.scope_id
        # a content op waits for its signer; a second pass is idle
        again = await consumer.reconcile(mesh.urls[0], "pull", scope=scope)
        assert again.ok and again.need == 0
        got = await kinds_and_chains(consumer) - before
        assert got == expected_closure(world)
        assert report.need == 7  # of 14 ops: 3 identities, 3 chain ops, 1 countersignature


async def test_a_scoped_push_sends_only_what_the_scope_holds(tmp_path: Path) -> None:
    world = build_world(seed=32)
    scope = parse_scope(world.chain.content_id)
    async with in_process_mesh(tmp_path, 2, **OFF) as mesh:
        holder, empty = mesh.relays
        await holder.ingest(world.tokens)
        before = await kinds_and_chains(empty)
        report = await holder.reconcile(mesh.urls[1], "push", scope=scope)
        assert report.ok, report.error
        assert await kinds_and_chains(empty) - before == expected_closure(world)
