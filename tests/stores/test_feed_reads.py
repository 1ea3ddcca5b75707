"""Store contract for the changes feed: seq ranges, parentless ops in
(createdAt, CID) order bounded by a snapshot seq, a chain's entries up to a
seq (and many chains' in one read), and the log's epoch (minted once,
persisted, reset on demand)."""

from __future__ import annotations

import asyncio

from stores.base import RelayStore
from tests.stores.conftest import append, is_durable, op, reopen


async def test_seq_range_is_bounded_on_both_sides(opened: RelayStore) -> None:
    await append(opened, *[op(f"c{i}", at=1000 + i) for i in range(6)])
    page = await opened.read_seq_range(1, 5, 10)
    assert [(e.seq, e.cid) for e in page] == [(2, "c1"), (3, "c2"), (4, "c3"), (5, "c4")]
    assert [e.cid for e in await opened.read_seq_range(0, 6, 2)] == ["c0", "c1"]
    assert await opened.read_seq_range(6, 6, 10) == []
    first = page[0]
    assert (first.author_did, first.created_at_ms) == ("did:dfos:a", 1001)
    assert first.kind == "identity-op"
    assert first.jws_token == "tok.c1" and first.state is not None


async def test_roots_in_created_order_within_a_snapshot(opened: RelayStore) -> None:
    await append(
        opened,
        op("g2", at=2000),
        op("g1", "identity-op", "did:dfos:b", at=1000),
        op("x1", parent="g2", at=3000),  # not a root
        op("b1", "beacon", "did:dfos:a", at=1500),
        op("a1", "artifact", "did:dfos:a", at=1000),  # same createdAt as g1: CID order
    )
    await append(opened, op("late", "artifact", "did:dfos:a", at=10))  # seq 6
    roots = await opened.read_roots(5, None, 10)
    assert [r.cid for r in roots] == ["a1", "g1", "b1", "g2"]
    assert (await opened.read_roots(6, None, 10))[0].cid == "late"
    page1 = await opened.read_roots(5, None, 2)
    page2 = await opened.read_roots(5, (page1[-1].created_at_ms, page1[-1].cid), 2)
    assert [r.cid for r in page1 + page2] == ["a1", "g1", "b1", "g2"]


async def test_roots_paged_inside_one_created_at(opened: RelayStore) -> None:
    # one createdAt for several roots, arriving out of CID order, and one
    # before the epoch: pages cut inside the group keep (createdAt, CID) order
    await append(
        opened,
        *[op(c, "artifact", "did:dfos:a", at=1000) for c in ("r3", "r1", "r4", "r2")],
        op("r0", "artifact", "did:dfos:a", at=-5),
    )
    pages, after = [], None
    while page := await opened.read_roots(5, after, 2):
        pages.append([r.cid for r in page])
        after = (page[-1].created_at_ms, page[-1].cid)
    assert pages == [["r0", "r1"], ["r2", "r3"], ["r4"]]


async def test_chain_entries_up_to_a_seq(opened: RelayStore) -> None:
    await append(opened, op("g", at=1), op("u1", parent="g", at=2), op("u2", parent="g", at=3))
    await append(opened, op("b1", "beacon", "did:dfos:a", at=4), op("u3", parent="u1", at=5))
    ops = await opened.read_chain_entries("did:dfos:a", ("identity-op",), 3)
    assert [(e.cid, e.parent_cid) for e in ops] == [("g", None), ("u1", "g"), ("u2", "g")]
    everything = await opened.read_chain_entries("did:dfos:a", ("identity-op", "beacon"), 5)
    assert [e.cid for e in everything] == ["g", "u1", "u2", "b1", "u3"]


async def test_many_chains_entries_in_one_read(opened: RelayStore) -> None:
    await append(opened, op("g", at=1), op("u1", parent="g", at=2))
    await append(opened, op("h", "identity-op", "did:dfos:b", at=3), op("u2", parent="u1", at=4))
    await append(opened, op("x", "identity-op", "did:dfos:c", at=5))
    await append(opened, op("b1", "beacon", "did:dfos:b", at=6))
    chains = ["did:dfos:b", "did:dfos:a", "did:dfos:a", "did:dfos:none"]
    found = await opened.read_chains_entries_after(chains, ("identity-op",), 0, 4, 100)
    assert [e.cid for e in found] == ["g", "u1", "h", "u2"]  # seq order, each once
    assert [e.chain_id for e in found] == ["did:dfos:a", "did:dfos:a", "did:dfos:b", "did:dfos:a"]
    kinds = ("identity-op", "beacon")
    both = await opened.read_chains_entries_after(chains, kinds, 0, 6, 100)
    assert [e.cid for e in both][-1] == "b1"


async def test_many_chains_entries_a_page_at_a_time(opened: RelayStore) -> None:
    await append(opened, op("g", at=1), op("b1", "beacon", "did:dfos:a", at=2))
    await append(opened, op("h", "identity-op", "did:dfos:b", at=3), op("u1", parent="g", at=4))
    await append(
        opened, op("a1", "artifact", "did:dfos:a", at=5), op("x", "identity-op", "did:dfos:c", at=6)
    )
    chains, kinds = (
        ["did:dfos:b", "did:dfos:a", "did:dfos:none"],
        ("identity-op", "beacon", "artifact"),
    )
    pages, after = [], 0
    while page := await opened.read_chains_entries_after(chains, kinds, after, 5, 2):
        pages.append([e.cid for e in page])
        after = page[-1].seq
    # both indexes (chain ops, standalone ops) merged in seq order, bounded on both sides
    assert pages == [["g", "b1"], ["h", "u1"], ["a1"]]
    assert [
        e.cid for e in await opened.read_chains_entries_after(chains, ("beacon",), 0, 6, 9)
    ] == ["b1"]
    assert await opened.read_chains_entries_after([], kinds, 0, 6, 9) == []


async def test_epoch_is_minted_once_and_survives_a_restart(opened: RelayStore) -> None:
    epoch = await opened.get_feed_epoch()
    assert epoch and "." not in epoch
    assert await opened.get_feed_epoch() == epoch
    if is_durable(opened):
        await opened.close()
        again = reopen(opened)
        await again.open()
        try:
            assert await again.get_feed_epoch() == epoch
            fresh = await again.reset_feed_epoch()
            assert fresh != epoch and await again.get_feed_epoch() == fresh
        finally:
            await again.close()
        await opened.open()
    else:
        fresh = await opened.reset_feed_epoch()
        assert fresh != epoch and await opened.get_feed_epoch() == fresh


async def test_commits_by_another_handle_are_pushed_where_the_backend_can(
    opened: RelayStore,
) -> None:
    heard: list[int] = []
    listening: list[bool] = []
    stop = await opened.watch_commits(heard.append, listening.append)
    if not is_durable(opened) or type(opened).__name__ == "SqliteStore":
        assert stop is None  # memory: one process; SQLite: the feed polls the head seq
        return
    assert stop is not None
    other = reopen(opened)  # another process's handle on the same log
    await other.open()
    try:
        await append(other, op("p1"), op("p2"))
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.02)
        assert heard == [2]
        assert listening == [True]  # it LISTENed at once, and has lost nothing since
    finally:
        await other.close()
        await stop()
