"""A hostile peer is bounded and cannot stall the relay by naming a large
scope in ``POST /sync/negentropy?scope=``. A scope's item set is built a
page of reads at a time, the loop free between pages; a set kept from an
earlier round is brought forward over the log since, not built again; rounds
for one scope at once share one build; and builds that pause count among
the long rounds that may run at once (one more is a 503). Before, the set
was built again in one go whenever the head had moved (always, on a relay
busy ingesting): ~7 µs an op, 70 ms and more of a blocked loop for one DID
with 10,000 artifacts, per round.

Stalls are the loop thread's CPU time between two turns of a ticker, so a
machine busy with other work does not make them longer."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import pytest

from relay import create_relay
from relay.protocol.negentropy import op_item
from relay.reconcile.scoped import ScopedItems
from relay.reconcile.scoped_build import PAGE
from relay.scope import Scope, effective_scope
from relay.testing.workload import WorkloadBuilder, mixed_workload
from stores.base import FeedEntry, OperationKind
from stores.memory import MemoryStore
from tests.support.loop_stall import longest_stall
from tests.support.relay_api import PAST_MS, post
from tests.support.served import served_relay

ARTIFACTS = 10_000
MAX_STALL_S = 0.030  # a step is a page of 500 ops, ~4 ms; the whole set was ~70 ms
OCTET = {"content-type": "application/octet-stream"}
QUERY = b"\x61\x00\x00\x00"  # a round over everything: the set is built, the answer short


@pytest.fixture(scope="module")
def large() -> tuple[list[str], list[str], list[str]]:
    """(one DID with ``ARTIFACTS`` artifacts then 6 small DIDs, their ops, ops of another DID)"""
    b = WorkloadBuilder(seed=11, start_ms=PAST_MS)
    owner = b.identity()
    for _ in range(ARTIFACTS):
        b.artifact(owner)
    dids = [owner.did, *(b.identity().did for _ in range(6))]
    tokens = list(b.tokens)
    b.tokens.clear()
    other = b.identity()
    for _ in range(20):
        b.artifact(other)
    return dids, tokens, list(b.tokens)


async def unpaced(store: MemoryStore, scope: Scope) -> list[tuple[int, bytes]]:
    """The set as it was built before: the whole closure at the head, at once."""
    entries: list[FeedEntry] = []
    await effective_scope(store, scope, await store.log_length(), collect=entries)
    return sorted({op_item(e.created_at_ms, e.cid) for e in entries})


async def test_scoped_rounds_under_ingest_never_stall_the_loop(
    large: tuple[list[str], list[str], list[str]],
) -> None:
    dids, tokens, extra = large
    async with served_relay(MemoryStore(), "asgi") as served:
        http = served.client
        for at in range(0, len(tokens), 500):
            await served.relay.ingest(tokens[at : at + 500])

        async def ask(scope: str) -> int:
            response = await http.post(
                "/sync/negentropy", params={"scope": scope}, content=QUERY, headers=OCTET
            )
            return response.status_code

        async def rounds_while_ingesting() -> list[int]:
            statuses = []
            for token in extra[:4]:  # the head moves before every round
                assert [r["status"] for r in await post(http, [token])] == ["new"]
                statuses.append(await ask(dids[0]))
            # scopes that name the large DID and one more: a set each, at once
            statuses += await asyncio.gather(*(ask(f"{dids[0]},{d}") for d in dids[1:]))
            return statuses

        statuses, stall = await longest_stall(rounds_while_ingesting())
        assert statuses[:4] == [200] * 4
        assert set(statuses) <= {200, 503} and 200 in statuses[4:]
        assert stall < MAX_STALL_S, f"the loop stalled {stall * 1000:.0f} ms"


async def test_a_set_brought_forward_holds_what_a_build_at_the_head_holds() -> None:
    tokens = mixed_workload(500, seed=5, now_ms=PAST_MS + 40 * 86_400_000)
    store = MemoryStore()
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest(tokens[:100])
        picked = await store.read_seq_range(0, 100, 100)
        members = [e.chain_id for e in picked if e.kind in ("identity-op", "content-op")]
        scopes = [Scope.of(members[i : i + 3]) for i in range(0, 30, 3)]
        items = ScopedItems(store)
        for at in range(100, len(tokens), 37):  # closures grow between rounds
            for scope in scopes:
                held = await items.storage(scope)
                assert list(held.items(0, held.size())) == await unpaced(store, scope)
            await relay.ingest(tokens[at : at + 37])


class CountingStore(MemoryStore):
    pages = 0

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        self.pages += 1
        return await super().read_chains_entries_after(
            chain_ids, kinds, after_seq, until_seq, limit
        )


async def test_a_large_set_is_built_in_steps_once_then_brought_forward(
    large: tuple[list[str], list[str], list[str]],
) -> None:
    dids, tokens, extra = large
    store = CountingStore()
    relay = create_relay(store)
    async with relay.running():
        for at in range(0, len(tokens), 500):
            await relay.ingest(tokens[at : at + 500])
        scope, items = Scope.of([dids[0]]), ScopedItems(store)
        # rounds at once share one build, built in steps
        sets, stall = await longest_stall(asyncio.gather(*(items.storage(scope) for _ in range(4))))
        assert stall < MAX_STALL_S, f"the loop stalled {stall * 1000:.0f} ms"
        assert all(s is sets[0] for s in sets)
        built_in = store.pages
        assert built_in <= 2 * ARTIFACTS / PAGE + 5  # one build (its ops, their targets), not four
        # the head moved: the set goes on from where it was, read again in no page
        await relay.ingest(extra[:3])
        held, stall = await longest_stall(items.storage(scope))
        assert store.pages == built_in and stall < MAX_STALL_S
        assert held is sets[0]
        assert list(held.items(0, held.size())) == await unpaced(store, scope)
