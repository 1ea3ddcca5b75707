"""A chain's tips and one branch of it, read from the store (``ForkReader``):
tips are the chain's ops no other op of it names as parent, in seq order
(the tips of several chains in one read: theirs, all in seq order); a
branch is a window of the ops from genesis to one op along parent links,
with the branch's length. Both see only the chain's ops of one kind up to a
log position, and neither buffered ops nor purged ones. On every backend."""

from __future__ import annotations

import pytest

from stores.base import CommitBatch, PendingOp, RelayStore, UnknownCursorError
from stores.moderation import ModerationBatch
from tests.stores.conftest import append, commit, op

A = "did:dfos:a"
IDENTITY = "identity-op"


async def forked(store: RelayStore) -> None:
    """g -> u1 -> u2 and g -> f1 -> f2 (a fork at genesis), u1 -> v (a second
    fork), plus a beacon and another chain beside them. Seqs 1..8."""
    await append(store, op("g", at=1), op("u1", parent="g", at=2))
    await append(store, op("b", "beacon", at=3), op("x", chain_id="did:dfos:x", at=3))
    await append(store, op("f1", parent="g", at=4), op("u2", parent="u1", at=5))
    await append(store, op("f2", parent="f1", at=6), op("v", parent="u1", at=7))


async def tip_cids(store: RelayStore, until: int = 10**6, chain_id: str = A) -> list[str]:
    return [e.cid for e in await store.read_chain_tips(chain_id, IDENTITY, until)]


async def branch(
    store: RelayStore, cid: str, after: str | None = None, limit: int = 100, until: int = 10**6
) -> tuple[int, int, list[str]] | None:
    page = await store.read_branch(A, IDENTITY, cid, until, after, limit)
    return None if page is None else (page.length, page.start, [e.cid for e in page.entries])


async def test_the_tips_of_a_forked_chain_are_its_childless_ops(opened: RelayStore) -> None:
    await forked(opened)
    assert await tip_cids(opened) == ["u2", "f2", "v"]
    [u2, _, _] = await opened.read_chain_tips(A, IDENTITY, 100)
    assert (u2.seq, u2.parent_cid, u2.created_at_ms, u2.kind) == (6, "u1", 5, IDENTITY)
    assert u2.jws_token == "tok.u2" and u2.state == op("u2", at=5).state


async def test_tips_are_read_as_of_a_log_position(opened: RelayStore) -> None:
    await forked(opened)
    assert await tip_cids(opened, until=1) == ["g"]
    assert await tip_cids(opened, until=4) == ["u1"]  # the beacon is no tip
    assert await tip_cids(opened, until=5) == ["u1", "f1"]
    assert await tip_cids(opened, until=7) == ["u2", "f2"]


async def test_an_unknown_chain_or_kind_has_no_tips(opened: RelayStore) -> None:
    await forked(opened)
    assert await tip_cids(opened, chain_id="did:dfos:nobody") == []
    assert await opened.read_chain_tips(A, "content-op", 100) == []
    assert await opened.read_chain_tips(A, "beacon", 100) == []
    assert await tip_cids(opened, chain_id="did:dfos:x") == ["x"]


async def test_the_tips_of_several_chains_are_each_chains_tips_in_seq_order(
    opened: RelayStore,
) -> None:
    await forked(opened)
    await append(
        opened,
        op("y", chain_id="did:dfos:y", at=8),
        op("x2", chain_id="did:dfos:x", parent="x", at=9),
    )
    chains = [A, "did:dfos:x", "did:dfos:y", "did:dfos:nobody"]

    async def both(until: int) -> list[str]:
        found = await opened.read_chains_tips(chains, IDENTITY, until)
        assert [e.seq for e in found] == sorted(e.seq for e in found)
        one_by_one = {
            e.cid for c in chains for e in await opened.read_chain_tips(c, IDENTITY, until)
        }
        assert {e.cid for e in found} == one_by_one
        return [e.cid for e in found]

    assert await both(100) == ["u2", "f2", "v", "y", "x2"]
    assert await both(4) == ["u1", "x"]  # as of a log position: x2 is not yet x's child
    assert await both(9) == ["x", "u2", "f2", "v", "y"]
    [u2, *_] = await opened.read_chains_tips(chains, IDENTITY, 100)
    assert (u2.seq, u2.parent_cid, u2.jws_token, u2.state) == (
        6,
        "u1",
        "tok.u2",
        op("u2", at=5).state,
    )
    assert await opened.read_chains_tips(chains, "content-op", 100) == []
    assert await opened.read_chains_tips(chains, "beacon", 100) == []  # a beacon is no tip
    assert await opened.read_chains_tips([], IDENTITY, 100) == []


async def test_a_branch_runs_from_genesis_to_its_op(opened: RelayStore) -> None:
    await forked(opened)
    assert await branch(opened, "u2") == (3, 0, ["g", "u1", "u2"])
    assert await branch(opened, "f2") == (3, 0, ["g", "f1", "f2"])
    assert await branch(opened, "v") == (3, 0, ["g", "u1", "v"])
    assert await branch(opened, "u1") == (2, 0, ["g", "u1"])  # any op ends a branch
    assert await branch(opened, "g") == (1, 0, ["g"])
    page = await opened.read_branch(A, IDENTITY, "f1", 100, None, 1)
    assert page is not None and (page.length, page.start) == (2, 0)
    assert [(e.cid, e.seq, e.jws_token) for e in page.entries] == [("g", 1, "tok.g")]


async def test_a_branch_is_paged_after_an_op_on_it(opened: RelayStore) -> None:
    await forked(opened)
    assert await branch(opened, "f2", limit=2) == (3, 0, ["g", "f1"])
    assert await branch(opened, "f2", after="f1", limit=2) == (3, 2, ["f2"])
    assert await branch(opened, "f2", after="g", limit=1) == (3, 1, ["f1"])
    assert await branch(opened, "f2", after="f2") == (3, 3, [])
    assert await branch(opened, "f2", limit=0) == (3, 0, [])


async def test_after_an_op_off_the_branch_is_an_unknown_cursor(opened: RelayStore) -> None:
    await forked(opened)
    for after in ("u1", "v", "b", "x", "nothing"):
        with pytest.raises(UnknownCursorError):
            await branch(opened, "f2", after=after)


async def test_an_op_outside_the_chain_ends_no_branch(opened: RelayStore) -> None:
    await forked(opened)
    assert await branch(opened, "nothing") is None
    assert await branch(opened, "b") is None  # a beacon of the DID
    assert await branch(opened, "x") is None  # another chain's op
    assert await opened.read_branch(A, "content-op", "u2", 100, None, 10) is None
    assert await opened.read_branch("did:dfos:x", IDENTITY, "u2", 100, None, 10) is None


async def test_a_branch_is_read_as_of_a_log_position(opened: RelayStore) -> None:
    await forked(opened)
    assert await branch(opened, "u2", until=5) is None  # u2 is seq 6
    assert await branch(opened, "u2", until=6) == (3, 0, ["g", "u1", "u2"])


async def test_buffered_ops_are_neither_tips_nor_on_a_branch(opened: RelayStore) -> None:
    await forked(opened)
    await opened.put_raw_ops([("w", "tok.w")])
    waiting = PendingOp("w2", "tok.w2", "op:zz", 1)
    await commit(opened, CommitBatch(waiting={"w2": waiting}))
    assert await tip_cids(opened) == ["u2", "f2", "v"]
    assert await branch(opened, "w") is None and await branch(opened, "w2") is None


async def test_a_purge_leaves_the_tips_and_branches_of_what_remains(opened: RelayStore) -> None:
    await forked(opened)
    doomed = [o for c in ("u2", "v") if (o := await opened.get_operation(c)) is not None]
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch(A, 9, operations=doomed))
    assert await tip_cids(opened) == ["u1", "f2"]  # u1 lost its children
    assert await branch(opened, "u2") is None
    assert await branch(opened, "u1") == (2, 0, ["g", "u1"])
    everything = [o for c in ("g", "u1", "f1", "f2") if (o := await opened.get_operation(c))]
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch(A, 9, operations=everything))
    assert await tip_cids(opened) == []
    assert await branch(opened, "f2") is None


async def test_a_deleted_identitys_delete_op_is_its_tip(opened: RelayStore) -> None:
    deleted = {"did": A, "deleted": True, "auth": [], "assert": [], "controller": []}
    await append(opened, op("g", at=1), op("d", parent="g", at=2, state=deleted))
    [tip] = await opened.read_chain_tips(A, IDENTITY, 100)
    assert (tip.cid, tip.state) == ("d", deleted)
    assert await branch(opened, "d") == (2, 0, ["g", "d"])


async def test_a_long_branch_is_walked_in_the_store(opened: RelayStore) -> None:
    ops = [op("c0", at=1)] + [op(f"c{i}", parent=f"c{i - 1}", at=i + 1) for i in range(1, 300)]
    for i in range(0, len(ops), 100):
        await append(opened, *ops[i : i + 100])
    assert await tip_cids(opened) == ["c299"]
    assert await branch(opened, "c299", limit=2) == (300, 0, ["c0", "c1"])
    assert await branch(opened, "c299", after="c297", limit=5) == (300, 298, ["c298", "c299"])
    assert await branch(opened, "c150", after="c10", limit=1) == (151, 11, ["c11"])
