"""A purge's plan and its write are one moderation session that no other
process sharing the store commits into: an op another worker sequences
while the plan is read lands after the purge (and waits, if it hangs off a
purged op), never between, so the store audits clean afterwards."""

from __future__ import annotations

import asyncio

import pytest

from relay import create_relay
from relay.audit import audit_store
from relay.config import RelayConfig
from relay.rules.outcomes import Status
from stores.base import RelayStore
from stores.memory import MemoryStore
from tests.stores.conftest import reopen
from tests.support.whole_purge import plan_purge

from .conftest import World

LANDS_WITHIN_S = 1.0  # an unblocked commit takes milliseconds


async def test_a_commit_by_another_process_waits_for_a_purge_under_way(
    world: World, store: RelayStore
) -> None:
    if isinstance(store, MemoryStore):
        pytest.skip("a memory store is shared by no other process")
    b, alice, bob = world.builder, world.alice, world.bob
    start = len(b.tokens)
    theirs = b.content_create(bob)
    b.content_update(theirs, alice, authorization=b.write_credential(bob, alice, theirs.content_id))
    results = await world.post(b.tokens[start:])
    assert {r["status"] for r in results} == {"new"}, results
    after_alice = b.content_update(theirs, bob)  # descends from alice's op
    other = create_relay(reopen(store), config=RelayConfig())
    async with other.running():
        async with store.moderating() as session:
            batch = await plan_purge(store, alice.did, world.clock())
            landing = asyncio.create_task(other.ingest([b.tokens[-1]]))
            await asyncio.wait({landing}, timeout=LANDS_WITHIN_S)
            await session.apply_moderation(batch)
        result = (await landing)[0]
    # alice's op is gone: bob's op on top of it waits for it, it is not sequenced
    assert result.status is not Status.NEW, result
    assert await store.get_operation(after_alice) is None
    report = await audit_store(store)
    assert report.clean, [f.line() for f in report.findings]
