"""Store contract: the store-then-verify raw buffer and the pending index
(WEB-RELAY.md "Convergence")."""

from __future__ import annotations

import pytest

from stores.base import CommitBatch, PendingOp, RelayStore, StateQuery
from stores.moderation import ModerationBatch
from tests.stores.conftest import append, commit, op


async def test_put_raw_ops_is_idempotent(opened: RelayStore) -> None:
    await opened.put_raw_ops([("c2", "tok.c2"), ("c1", "tok.c1")])
    await opened.put_raw_ops([("c1", "tok.c1"), ("c1", "tok.c1")])
    assert await opened.count_unsequenced() == 2
    assert await opened.get_unsequenced(10) == [
        PendingOp("c1", "tok.c1", ""),
        PendingOp("c2", "tok.c2", ""),
    ]
    await opened.put_raw_ops([])


async def test_sequenced_ops_are_not_rebuffered(opened: RelayStore) -> None:
    assert await opened.put_raw_ops([("c1", "tok.c1")]) == set()
    await append(opened, op("c1"))  # resolves c1
    assert await opened.count_unsequenced() == 0
    # it answers which ops are already sequenced, and does not buffer them
    assert await opened.put_raw_ops([("c1", "tok.c1"), ("c2", "tok.c2")]) == {"c1"}
    assert [p.cid for p in await opened.get_unsequenced(10)] == ["c2"]


async def test_get_unsequenced_pages_by_cid(opened: RelayStore) -> None:
    await opened.put_raw_ops([(f"c{i}", f"tok.c{i}") for i in range(5)])
    first = await opened.get_unsequenced(2)
    assert [p.cid for p in first] == ["c0", "c1"]
    rest = await opened.get_unsequenced(10, after_cid="c1")
    assert [p.cid for p in rest] == ["c2", "c3", "c4"]


async def test_waiting_ops_are_indexed_by_dependency(opened: RelayStore) -> None:
    await opened.put_raw_ops([("w1", "tok.w1"), ("w2", "tok.w2"), ("w3", "tok.w3")])
    waiting = {
        "w1": PendingOp("w1", "tok.w1", "op:p1"),
        "w2": PendingOp("w2", "tok.w2", "op:p1"),
        "w3": PendingOp("w3", "tok.w3", "did:dfos:x"),
    }
    await commit(opened, CommitBatch(waiting=waiting))
    assert await opened.count_unsequenced() == 3
    assert {p.cid: p for p in await opened.get_unsequenced(10)} == waiting
    async with opened.sequencing() as s:
        assert await s.count_pending() == 3
        taken = await s.take_waiting(["op:p1", "op:unrelated"])
        assert sorted(taken, key=lambda p: p.cid) == [waiting["w1"], waiting["w2"]]
        assert await s.take_waiting(["op:p1"]) == []  # taken once
        # w1 is sequenced, w2 still waits (now for something else)
        await s.commit(
            CommitBatch(
                operations=[op("w1")],
                resolved_cids={"w1"},
                waiting={"w2": PendingOp("w2", "tok.w2", "op:p2")},
            )
        )
    assert await opened.count_unsequenced() == 2
    async with opened.sequencing() as s:
        assert await s.count_pending() == 2
        assert (await s.read_state(StateQuery(count_pending=True))).pending == 2
        assert await s.take_waiting(["op:p2"]) == [PendingOp("w2", "tok.w2", "op:p2")]
        assert await s.take_waiting(["did:dfos:x"]) == [waiting["w3"]]


async def test_taking_follows_a_parked_chain(opened: RelayStore) -> None:
    # c1 <- c2 <- c3 parked link by link; d waits for an identity; x is unrelated
    waiting = {
        "c1": PendingOp("c1", "tok.c1", "op:c0"),
        "c2": PendingOp("c2", "tok.c2", "op:c1"),
        "c3": PendingOp("c3", "tok.c3", "op:c2"),
        "d": PendingOp("d", "tok.d", "did:dfos:c3"),
        "x": PendingOp("x", "tok.x", "op:y"),
        # a forged cycle ends: each op comes out once
        "k1": PendingOp("k1", "tok.k1", "op:k2"),
        "k2": PendingOp("k2", "tok.k2", "op:k1"),
    }
    await commit(opened, CommitBatch(waiting=waiting))
    async with opened.sequencing() as s:
        taken = await s.take_waiting(["op:c0"])
        assert sorted(taken, key=lambda p: p.cid) == [waiting[c] for c in ("c1", "c2", "c3")]
        assert await s.take_waiting(["op:c1", "op:c0"]) == []  # taken once
        assert await s.take_waiting(["did:dfos:c3"]) == [waiting["d"]]
        cycle = await s.take_waiting(["op:k1"])
        assert sorted(p.cid for p in cycle) == ["k1", "k2"]


async def test_a_failed_session_takes_nothing_away(opened: RelayStore) -> None:
    waiting = {"w": PendingOp("w", "tok.w", "op:p"), "v": PendingOp("v", "tok.v", "op:w")}
    await commit(opened, CommitBatch(waiting=waiting))
    with pytest.raises(RuntimeError):
        async with opened.sequencing() as s:
            assert len(await s.take_waiting(["op:p"])) == 2
            raise RuntimeError("the session fails before its commit")
    async with opened.sequencing() as s:
        taken = await s.take_waiting(["op:p"])
        assert sorted(taken, key=lambda p: p.cid) == [waiting["v"], waiting["w"]]


async def test_waiting_without_prior_raw_buffering(opened: RelayStore) -> None:
    await commit(opened, CommitBatch(waiting={"w": PendingOp("w", "tok.w", "op:p")}))
    assert await opened.get_unsequenced(5) == [PendingOp("w", "tok.w", "op:p")]


async def test_resolved_ops_leave_the_buffer(opened: RelayStore) -> None:
    await opened.put_raw_ops([("r1", "tok.r1"), ("r2", "tok.r2")])
    await commit(opened, CommitBatch(waiting={"r2": PendingOp("r2", "tok.r2", "op:x")}))
    await commit(opened, CommitBatch(resolved_cids={"r1", "r2"}))
    assert await opened.count_unsequenced() == 0
    async with opened.sequencing() as s:
        assert await s.count_pending() == 0
        assert await s.take_waiting(["op:x"]) == []


async def test_only_a_token_that_replaces_takes_the_place_of_another_under_its_cid(
    opened: RelayStore,
) -> None:
    """``PendingOp.replaces``: another token of the CID leaves the buffered op
    as it is unless the session says it replaces it; the same token re-parked
    moves to its new dependency either way."""
    first = PendingOp("w", "tok.first", "op:p1", 1_000)
    await commit(opened, CommitBatch(waiting={"w": first}))
    await commit(opened, CommitBatch(waiting={"w": PendingOp("w", "tok.copy", "op:p2", 2_000)}))
    assert await opened.get_unsequenced(10) == [first]
    await commit(opened, CommitBatch(waiting={"w": PendingOp("w", "tok.first", "op:p3", 3_000)}))
    assert await opened.get_unsequenced(10) == [PendingOp("w", "tok.first", "op:p3", 1_000)]
    checked = PendingOp("w", "tok.checked", "op:p4", 4_000, replaces=True)
    await commit(opened, CommitBatch(waiting={"w": checked}))
    assert await opened.get_unsequenced(10) == [PendingOp("w", "tok.checked", "op:p4", 1_000)]
    async with opened.sequencing() as s:
        assert await s.count_pending() == 1


async def test_copies_wait_beside_the_buffered_op_and_count_as_pending(
    opened: RelayStore,
) -> None:
    """``CommitBatch.copies``: other tokens of a buffered CID, taken by CID
    (each once per session), counted in the pending count; one gone leaves."""
    primary = PendingOp("w", "tok.w", "op:p", 1_000)
    copy_a, copy_b = PendingOp("w", "tok.a", "", 2_000), PendingOp("w", "tok.b", "", 3_000)
    await commit(opened, CommitBatch(waiting={"w": primary}, copies={("w", "ha"): copy_a}))
    await commit(opened, CommitBatch(copies={("w", "hb"): copy_b, ("w", "ha"): copy_a}))
    async with opened.sequencing() as s:
        assert await s.count_pending() == 3
        assert await s.get_buffered(["w", "nowhere"]) == {"w": "tok.w"}
        taken = await s.take_copies(["w"])
        assert sorted(taken, key=lambda t: t[0]) == [("ha", copy_a), ("hb", copy_b)]
        assert await s.take_copies(["w"]) == []  # taken once per session
    await commit(opened, CommitBatch(copies_gone={("w", "ha")}))
    async with opened.sequencing() as s:
        assert await s.take_copies(["w"]) == [("hb", copy_b)]
        assert await s.count_pending() == 2
    assert await opened.get_unsequenced(10) == [primary]  # copies are not ops of their own


async def test_copies_leave_with_the_op_buffered_under_their_cid(opened: RelayStore) -> None:
    """Resolved, the CID takes its copies with it, and copies staged for a
    CID resolved in the same batch are not written."""
    await commit(
        opened,
        CommitBatch(
            waiting={"w": PendingOp("w", "tok.w", "op:p")},
            copies={("w", "h1"): PendingOp("w", "tok.1", "")},
        ),
    )
    await commit(
        opened,
        CommitBatch(resolved_cids={"w"}, copies={("w", "h2"): PendingOp("w", "tok.2", "")}),
    )
    async with opened.sequencing() as s:
        assert await s.take_copies(["w"]) == []
        assert await s.count_pending() == 0


async def test_read_state_answers_the_token_buffered_under_each_cid_and_its_copies(
    opened: RelayStore,
) -> None:
    """With the token buffered under each CID come the hashes of the copies
    beside it (what the per-op cap on copies counts), read only."""
    copies = {("w", "h1"): PendingOp("w", "tok.1", ""), ("w", "h2"): PendingOp("w", "tok.2", "")}
    await commit(
        opened,
        CommitBatch(
            waiting={"w": PendingOp("w", "tok.w", "op:p"), "v": PendingOp("v", "tok.v", "op:p")},
            copies=copies,
        ),
    )
    async with opened.sequencing() as s:
        rows = await s.read_state(StateQuery(buffered=frozenset({"w", "v", "x"})))
        assert rows.buffered == {"w": "tok.w", "v": "tok.v"}
        assert rows.copies == {"w": {"h1", "h2"}}
        assert await s.get_copy_hashes(["w", "v", "x"]) == {"w": {"h1", "h2"}}
        assert len(await s.take_copies(["w"])) == 2  # reading the hashes took nothing


async def test_an_operator_drop_can_put_a_copy_in_its_ops_place(opened: RelayStore) -> None:
    """``ModerationBatch.raw_replaced``: the buffered op leaves and the named
    copy takes its place, waiting for what the op waited for; the other
    copies stay beside it unless named in ``raw_copies_gone``."""
    copies = {
        ("w", "h1"): PendingOp("w", "tok.1", "", 2_000),
        ("w", "h2"): PendingOp("w", "tok.2", "", 3_000),
        ("w", "h3"): PendingOp("w", "tok.3", "", 4_000),
    }
    primary = PendingOp("w", "tok.w", "op:p", 1_000)
    await commit(opened, CommitBatch(waiting={"w": primary}, copies=copies))
    assert sorted(h for h, _ in await opened.get_copies(["w", "x"])) == ["h1", "h2", "h3"]
    async with opened.moderating() as session:
        batch = ModerationBatch(raw_replaced={"w": ("h1", "tok.1")}, raw_copies_gone={("w", "h3")})
        assert await session.apply_moderation(batch) == 1
    assert await opened.get_unsequenced(10) == [PendingOp("w", "tok.1", "op:p", 1_000)]
    assert [(h, c.jws_token) for h, c in await opened.get_copies(["w"])] == [("h2", "tok.2")]
    async with opened.sequencing() as s:
        assert await s.count_pending() == 2
        assert [p.jws_token for p in await s.take_waiting(["op:p"])] == ["tok.1"]
