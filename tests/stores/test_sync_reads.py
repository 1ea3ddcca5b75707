"""Store contract for reconciliation: every op as a (seq, createdAt, CID)
item in seq order, and ops read back by CID with their seq."""

from __future__ import annotations

from stores.base import RelayStore
from tests.stores.conftest import append, op


async def test_sync_items_follow_the_log_from_any_seq(opened: RelayStore) -> None:
    await append(opened, *[op(f"c{i}", at=5000 - i) for i in range(5)])
    assert await opened.read_sync_items(0, 10) == [
        (1, 5000, "c0"), (2, 4999, "c1"), (3, 4998, "c2"), (4, 4997, "c3"), (5, 4996, "c4"),
    ]  # fmt: skip
    assert await opened.read_sync_items(3, 1) == [(4, 4997, "c3")]
    assert await opened.read_sync_items(5, 10) == []


async def test_operations_are_read_by_cid_and_unknown_ones_are_absent(opened: RelayStore) -> None:
    await append(opened, op("g", at=1), op("b", "beacon", "did:dfos:a", at=2))
    found = await opened.read_operations(["b", "g", "nope"])
    assert sorted(found) == ["b", "g"]
    assert (found["g"].seq, found["b"].seq, found["b"].kind) == (1, 2, "beacon")
    assert await opened.read_operations([]) == {}
