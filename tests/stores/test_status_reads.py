"""Store contract: what explains an op's status. Where a sequenced op sits,
what a buffered op waits for and since when (kept while it stays buffered),
the bounded rejection notes (latest per CID wins; the oldest are dropped
beyond ``keep``; they survive a reopen on durable stores), and the buffer's
summary by dependency kind and age."""

from __future__ import annotations

from stores.base import (
    CommitBatch,
    OpLocation,
    PendingOp,
    RejectionNote,
    RelayStore,
    waits_for_policy,
)
from tests.stores.conftest import append, commit, is_durable, op, reopen


def note(cid: str, at: int, reason: str = "bad-signature") -> RejectionNote:
    return RejectionNote(cid, reason, f"detail of {cid}", at, f"hash.{cid}")


async def test_locate_operations(opened: RelayStore) -> None:
    await append(opened, op("g1"), op("c1", "content-op", "content1", at=2000))
    found = await opened.locate_operations(["c1", "g1", "nope"])
    assert found == {
        "g1": OpLocation("g1", "identity-op", "did:dfos:a", 1),
        "c1": OpLocation("c1", "content-op", "content1", 2),
    }
    assert await opened.locate_operations([]) == {}


async def test_find_buffered_answers_raw_and_waiting_ops(opened: RelayStore) -> None:
    await opened.put_raw_ops([("raw", "tok.raw"), ("w", "tok.w")])
    await commit(opened, CommitBatch(waiting={"w": PendingOp("w", "tok.w", "op:p", 5000)}))
    found = await opened.find_buffered(["raw", "w", "absent"])
    assert found == {
        "raw": PendingOp("raw", "tok.raw", "", None),
        "w": PendingOp("w", "tok.w", "op:p", 5000),
    }


async def test_waiting_since_is_kept_while_the_op_stays_buffered(opened: RelayStore) -> None:
    await commit(opened, CommitBatch(waiting={"w": PendingOp("w", "tok.w", "op:p1", 1000)}))
    async with opened.sequencing() as s:
        [taken] = await s.take_waiting(["op:p1"])
        assert taken.waits_for == "op:p1"
        # parked again, for another dependency, later: it has waited since 1000
        await s.commit(CommitBatch(waiting={"w": PendingOp("w", "tok.w", "did:x", 9000)}))
    assert await opened.find_buffered(["w"]) == {"w": PendingOp("w", "tok.w", "did:x", 1000)}
    assert await opened.get_unsequenced(5) == [PendingOp("w", "tok.w", "did:x", 1000)]
    # a CID both resolved and waiting in one batch stays waiting, since kept
    batch = CommitBatch(resolved_cids={"w"}, waiting={"w": PendingOp("w", "tok.w", "op:q", 7)})
    await commit(opened, batch)
    assert (await opened.find_buffered(["w"]))["w"] == PendingOp("w", "tok.w", "op:q", 1000)
    # resolved, then buffered anew: a fresh since
    await commit(opened, CommitBatch(resolved_cids={"w"}))
    assert await opened.find_buffered(["w"]) == {}
    await commit(opened, CommitBatch(waiting={"w": PendingOp("w", "tok.w", "op:q", 8000)}))
    assert (await opened.find_buffered(["w"]))["w"].since_ms == 8000


async def test_rejection_notes_latest_per_cid_wins(opened: RelayStore) -> None:
    await opened.record_rejection_notes([note("a", 1), note("b", 2)], keep=10)
    await opened.record_rejection_notes([note("a", 3, "future-timestamp")], keep=10)
    # within one call, the last note of a CID wins
    await opened.record_rejection_notes([note("c", 4), note("c", 5, "chain-rule")], keep=10)
    found = await opened.get_rejection_notes(["a", "b", "c", "zzz"])
    assert found == {
        "a": note("a", 3, "future-timestamp"),
        "b": note("b", 2),
        "c": note("c", 5, "chain-rule"),
    }
    await opened.record_rejection_notes([], keep=10)
    assert await opened.get_rejection_notes([]) == {}


async def test_rejection_notes_are_bounded_oldest_first(opened: RelayStore) -> None:
    await opened.record_rejection_notes([note(f"n{i}", i) for i in range(5)], keep=3)
    assert set(await opened.get_rejection_notes([f"n{i}" for i in range(5)])) == {
        "n2",
        "n3",
        "n4",
    }
    # re-noting n2 makes it the most recent: n3 is now the oldest and goes
    await opened.record_rejection_notes([note("n2", 9)], keep=3)
    await opened.record_rejection_notes([note("n5", 10)], keep=3)
    names = [f"n{i}" for i in range(6)]
    assert set(await opened.get_rejection_notes(names)) == {"n2", "n4", "n5"}


async def test_rejection_notes_survive_a_reopen(opened: RelayStore) -> None:
    await opened.record_rejection_notes([note("kept", 1)], keep=10)
    if not is_durable(opened):
        return
    await opened.close()
    again = reopen(opened)
    await again.open()
    try:
        assert await again.get_rejection_notes(["kept"]) == {"kept": note("kept", 1)}
    finally:
        await again.close()


async def test_pending_summary_by_dependency_kind_and_age(opened: RelayStore) -> None:
    empty = await opened.pending_summary([100])
    assert (empty.waiting, empty.older, empty.unverified, empty.oldest) == (
        {"op": 0, "did": 0, "policy": 0},
        {"op": [0], "did": [0], "policy": [0]},
        0,
        None,
    )
    await opened.put_raw_ops([("raw1", "t"), ("raw2", "t")])
    waiting = {
        "a": PendingOp("a", "tok.a", "op:p", 1000),
        "b": PendingOp("b", "tok.b", "op:q", 5000),
        "c": PendingOp("c", "tok.c", "did:dfos:x", 3000),
        "d": PendingOp("d", "tok.d", "did:dfos:y", 9000),
        "e": PendingOp("e", "tok.e", "did:dfos:y"),  # since unknown
        "f": PendingOp("f", "tok.f", waits_for_policy("f"), 2000),  # the policy failed on it
    }
    await commit(opened, CommitBatch(waiting=waiting))
    summary = await opened.pending_summary([4000, 1000, 0])
    assert summary.waiting == {"op": 2, "did": 3, "policy": 1}
    assert summary.older == {"op": [1, 1, 0], "did": [1, 0, 0], "policy": [1, 0, 0]}
    assert summary.unverified == 2
    assert summary.oldest == waiting["a"]
    no_cutoffs = await opened.pending_summary([])
    assert no_cutoffs.older == {"op": [], "did": [], "policy": []}
