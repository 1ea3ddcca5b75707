"""Store contract: the ops kept through a write-policy error (waiting under
``policy:<cid>``) are read from the store by whoever retries them, paged by
CID; and such an op starts waiting anew when it is kept (its ``since_ms``
is when the policy first failed on it, kept while it is kept again), where
an op parked for another dependency keeps its first ``since_ms``."""

from __future__ import annotations

from stores.base import CommitBatch, PendingOp, RelayStore, waits_for_op, waits_for_policy
from tests.stores.conftest import commit


def _waiting(*ops: PendingOp) -> CommitBatch:
    return CommitBatch(waiting={p.cid: p for p in ops})


async def test_kept_ops_are_read_and_paged_by_cid(opened: RelayStore) -> None:
    await commit(
        opened,
        _waiting(
            PendingOp("c3", "tok.c3", waits_for_policy("c3"), 30),
            PendingOp("c1", "tok.c1", waits_for_policy("c1"), 10),
            PendingOp("c2", "tok.c2", waits_for_op("c0"), 20),  # not kept: waits for c0
            PendingOp("c4", "tok.c4", waits_for_policy("c4"), 40),
        ),
    )
    await opened.put_raw_ops([("c5", "tok.c5")])  # not attempted yet
    first = await opened.get_waiting_for_policy(2)
    assert [(p.cid, p.jws_token, p.waits_for, p.since_ms) for p in first] == [
        ("c1", "tok.c1", "policy:c1", 10),
        ("c3", "tok.c3", "policy:c3", 30),
    ]
    rest = await opened.get_waiting_for_policy(10, after_cid="c3")
    assert [p.cid for p in rest] == ["c4"]
    assert await opened.get_waiting_for_policy(10, after_cid="c4") == []


async def test_a_kept_op_starts_waiting_for_the_policy_anew(opened: RelayStore) -> None:
    await commit(opened, _waiting(PendingOp("c1", "tok.c1", waits_for_op("c0"), 100)))
    await commit(opened, _waiting(PendingOp("c1", "tok.c1", waits_for_op("c9"), 200)))
    assert (await opened.find_buffered(["c1"]))["c1"].since_ms == 100  # still since 100
    await commit(opened, _waiting(PendingOp("c1", "tok.c1", waits_for_policy("c1"), 300)))
    assert (await opened.find_buffered(["c1"]))["c1"].since_ms == 300  # kept: anew
    await commit(opened, _waiting(PendingOp("c1", "tok.c1", waits_for_policy("c1"), 400)))
    [kept] = await opened.get_waiting_for_policy(10)
    assert kept.since_ms == 300  # kept again: still since it was first kept
