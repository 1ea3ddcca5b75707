"""Properties of the scoped stream over random worlds (hypothesis):

- it holds exactly the effective scope, as the closure rules define it over
  the ops themselves;
- every op comes after the identities it needs;
- it is a function of the log alone: the stream resumed from any position is
  the rest of the stream from the start (no loss, no repeat).
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from relay import create_relay
from relay.protocol import decode_credential_unsafe, decode_jws
from relay.scope import Scope, ScopeTracker, effective_scope
from stores.base import FeedEntry
from stores.memory import MemoryStore

from .world import picked_scope, random_world


def closure_by_definition(entries: list[FeedEntry], scope: Scope) -> set[str]:
    """The effective scope's op CIDs, from the rules applied to the ops."""
    intent_ops = [
        e for e in entries
        if (e.kind == "content-op" and e.chain_id in scope.content_ids)
        or (e.kind in ("identity-op", "beacon", "artifact") and e.chain_id in scope.dids)
    ]  # fmt: skip
    targets = {e.cid for e in intent_ops}
    countersigns = [e for e in entries if e.kind == "countersign" and e.chain_id in targets]
    needed = set(scope.dids)
    for e in intent_ops + countersigns:
        if e.kind == "content-op":
            needed |= {e.author_did, (e.state or {})["creator_did"]}
            grant = decode_jws(e.jws_token).payload.get("authorization")
            if isinstance(grant, str):
                needed.add(decode_credential_unsafe(grant).iss)
        elif e.kind != "identity-op":
            needed.add(e.author_did)
    closure = [e for e in entries if e.kind == "identity-op" and e.chain_id in needed]
    return {e.cid for e in intent_ops + countersigns + closure}


async def stream_from(store: MemoryStore, scope: Scope, start: int) -> list[tuple[int, str]]:
    """(scan position, cid) of the scoped stream from ``start``."""
    head = await store.log_length()
    tracker = ScopeTracker(store, await effective_scope(store, scope, start))
    out: list[tuple[int, str]] = []
    for entry in await store.read_seq_range(start, head, head):
        out.extend((entry.seq, a.entry.cid) for a in await tracker.admit([entry]))
    return out


async def check(seed: int, picks: list[int], cut: int) -> None:
    store = MemoryStore()
    relay = create_relay(store)
    async with relay.running():
        # a witness countersigning one op twice, or its own op, is not logged: fine
        await relay.ingest(random_world(seed))
        head = await store.log_length()
        entries = await store.read_seq_range(0, head, head)
        scope = await picked_scope(store, picks)
        whole = await stream_from(store, scope, 0)
        cids = [cid for _, cid in whole]
        assert len(cids) == len(set(cids))
        assert set(cids) == closure_by_definition(entries, scope)
        by_cid = {e.cid: e for e in entries}
        seen_identities: set[str] = set()
        for cid in cids:
            e = by_cid[cid]
            if e.kind == "identity-op":
                seen_identities.add(e.chain_id)
            else:
                assert e.author_did in seen_identities
        position = cut % (head + 1)
        rest = await stream_from(store, scope, position)
        assert [c for _, c in rest] == [c for s, c in whole if s > position]


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    picks=st.lists(st.integers(0, 100), min_size=1, max_size=3),
    cut=st.integers(0, 10**4),
)
def test_the_scoped_stream_is_the_closure_dependencies_first_and_resumable(
    seed: int, picks: list[int], cut: int
) -> None:
    asyncio.run(check(seed, picks, cut))
