"""Tips and branch pages read by depth and kept tips (schema v10) answer
exactly what walking the whole chain answers: tips are the chain's ops of
the kind, up to the log position, that none of them names as parent; a
branch runs from the op along parent links until a parent is not one of
them. Compared on a long chain with forks (at genesis, mid-chain, near the
head, and two parallel branches longer than a read probes), ops committed
one by one and in batches holding parent and child, every log position
sampled, and again after purges that leave a fork without its branch and a
branch without its middle. On every backend."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from stores.base import BranchPage, FeedEntry, RelayStore, UnknownCursorError
from stores.moderation import ModerationBatch
from tests.stores.conftest import append, op

A = "did:dfos:a"
B = "did:dfos:b"
IDENTITY = "identity-op"
TRUNK = 120
TWIN = 70  # two parallel branches, longer than a branch read probes for one op a depth


def workload() -> list[list]:
    """Batches of ops: a trunk t0..t119 of A, a fork at genesis (g1, g2),
    one mid-chain (m1..m3 off t60), one off the head's parent (h1 off t118),
    twin branches x/y of TWIN ops off t30, and chain B and a beacon beside."""
    trunk = [op("t0", at=1)] + [op(f"t{i}", parent=f"t{i - 1}", at=i + 1) for i in range(1, TRUNK)]
    forks = [op("g1", parent="t0", at=500), op("g2", parent="g1", at=501)]
    forks += [op("m1", parent="t60", at=502), op("m2", parent="m1", at=503)]
    forks += [op("m3", parent="m2", at=504), op("h1", parent="t118", at=505)]
    twins = []
    for name in ("x", "y"):
        twins += [op(f"{name}0", parent="t30", at=600)]
        twins += [op(f"{name}{i}", parent=f"{name}{i - 1}", at=600 + i) for i in range(1, TWIN)]
    side = [op("b0", chain_id=B, at=1), op("b1", chain_id=B, parent="b0", at=2)]
    side += [op("beacon", "beacon", at=3)]
    batches: list[list] = [[o] for o in trunk[:40]]  # one by one
    batches += [trunk[40:90] + side, forks[:2], trunk[90:], forks[2:]]  # parent and child together
    batches += [twins[i : i + 7] for i in range(0, len(twins), 7)]
    return batches


def walked_tips(chain: Sequence[FeedEntry]) -> list[str]:
    parents = {e.parent_cid for e in chain}
    return [e.cid for e in chain if e.cid not in parents]


def walked_branch(
    chain: Sequence[FeedEntry], cid: str, after: str | None, limit: int
) -> tuple[int, int, list[str]] | None:
    by_cid = {e.cid: e for e in chain}
    if cid not in by_cid:
        return None
    path = [cid]
    while (parent := by_cid[path[-1]].parent_cid) in by_cid:
        path.append(parent)
    path.reverse()
    start = 0
    if after is not None:
        if after not in path:
            raise UnknownCursorError(after)
        start = path.index(after) + 1
    return len(path), start, path[start : start + max(limit, 0)]


def shown(page: BranchPage | None) -> tuple[int, int, list[str]] | None:
    return None if page is None else (page.length, page.start, [e.cid for e in page.entries])


async def same_answers(store: RelayStore, untils: Sequence[int]) -> int:
    compared = 0
    for until in untils:
        chain = await store.read_chain_entries(A, [IDENTITY], until)
        tips = await store.read_chain_tips(A, IDENTITY, until)
        assert [e.cid for e in tips] == walked_tips(chain), until
        assert tips == [e for e in chain if e.cid in {t.cid for t in tips}]  # whole entries
        cids = [e.cid for e in chain]
        ends = {*walked_tips(chain), *cids[:: max(len(cids) // 6, 1)], "b1", "beacon", "zz"}
        for end in sorted(ends):
            afters = [None, "t0", "t31", "x5", "y5", "m2", "t118", end, "zz"]
            for after in afters:
                for limit in (0, 2, 100):
                    try:
                        want = walked_branch(chain, end, after, limit)
                    except UnknownCursorError:
                        with pytest.raises(UnknownCursorError):
                            await store.read_branch(A, IDENTITY, end, until, after, limit)
                    else:
                        page = await store.read_branch(A, IDENTITY, end, until, after, limit)
                        assert shown(page) == want, (until, end, after, limit)
                        if page is not None:  # whole entries, not just CIDs
                            on = {e.cid: e for e in chain}
                            assert list(page.entries) == [on[e.cid] for e in page.entries]
                    compared += 1
    return compared


async def test_fork_reads_answer_as_walking_the_chain(opened: RelayStore) -> None:
    for batch in workload():
        await append(opened, *batch)
    head = await opened.log_length()
    untils = [1, 41, 95, 160, head]
    assert await same_answers(opened, untils) > 1_000
    # a fork's branch goes (as a purge removes it: with its descendants) ...
    doomed = ["m1", "m2", "m3", *(f"y{i}" for i in range(TWIN))]
    purged = [o for c in doomed if (o := await opened.get_operation(c)) is not None]
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch(A, 9, operations=purged))
    await same_answers(opened, [130, head])
    # ... and a branch loses its middle: the ops above it start a branch
    middle = [o for c in ("t50", "x10") if (o := await opened.get_operation(c)) is not None]
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch(A, 10, operations=middle))
    await same_answers(opened, [95, head])
    await append(opened, op("t120", parent="t119", at=900), op("t121", parent="t120", at=901))
    await same_answers(opened, [await opened.log_length()])
