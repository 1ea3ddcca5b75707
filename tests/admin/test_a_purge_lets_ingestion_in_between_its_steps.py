"""A purge runs in bounded steps and lets the sequencing lock go between
them: an unrelated op posted while it runs is sequenced before it ends
(instead of waiting for all of it: 200 000 ops once held ingestion about
10 s), and the purge still removes what it planned, nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from relay.audit import audit_store
from relay.config import RelayConfig
from relay.rules.outcomes import Status
from stores.base import RelayStore
from tests.support.whole_purge import plan_purge

from .conftest import World, open_world

STEP_OPS = 5
CHAINS, UPDATES = 6, 40  # alice's: 246 ops, about 50 steps


@pytest.fixture
async def stepping(store: RelayStore, audit_lines: list[dict[str, Any]]) -> AsyncIterator[World]:
    config = RelayConfig(purge_step_ops=STEP_OPS)
    async with open_world(store, "in-process", audit_lines, config) as w:
        yield w


async def test_an_unrelated_post_is_sequenced_while_a_purge_runs(stepping: World) -> None:
    w, b = stepping, stepping.builder
    start = len(b.tokens)
    for _ in range(CHAINS):
        chain = b.content_create(w.alice)
        for _ in range(UPDATES):
            b.content_update(chain, w.alice)
    theirs = b.content_create(w.bob)  # alice writes the head of bob's chain: it is rewound
    b.content_update(theirs, w.alice, authorization=b.write_credential(w.bob, w.alice))
    results = await w.relay.ingest(b.tokens[start:])
    assert {r.status for r in results} == {Status.NEW}
    store = w.relay.store
    planned = {op.cid for op in (await plan_purge(store, w.alice.did, w.clock())).operations}
    signed = len(await store.operations_signed_by(w.alice.did))  # all of them are planned
    kept = {e.cid for e in await store.read_seq_range(0, 10**9, 10**6)} - planned
    unrelated = w.beacon(w.bob)

    purge = asyncio.create_task(w.admin("PUT", f"/admin/bans/{w.alice.did}", {"purge": True}))
    while not purge.done() and len(await store.operations_signed_by(w.alice.did)) == signed:
        await asyncio.sleep(0)  # until its first step has removed ops
    assert not purge.done(), "the purge removed everything in one step"
    results = await w.post([unrelated])
    left = len(await store.operations_signed_by(w.alice.did))

    assert results[0]["status"] == "new"
    assert 0 < left < signed, "the post waited for the whole purge"
    answer = (await purge).json()["purge"]
    assert answer["operations"] == len(planned) and answer["chainsRewound"] == 1
    assert await store.operations_signed_by(w.alice.did) == []
    now = {e.cid for e in await store.read_seq_range(0, 10**9, 10**6)}
    assert now == kept | {results[0]["cid"]}
    assert sorted(p.cid for p in await store.list_purged(w.alice.did)) == sorted(planned)
    assert await store.purges_under_way() == {}
    report = await audit_store(store)
    assert report.clean, [f.line() for f in report.findings]
