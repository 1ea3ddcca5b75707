"""Store contract: the global log and per-chain logs (WEB-RELAY.md
"Operation Log"): commit order, cursor paging, unknown cursors."""

from __future__ import annotations

import pytest

from stores.base import CommitBatch, LogEntry, RelayStore, StateQuery, UnknownCursorError
from tests.stores.conftest import append, commit, op


def entry(
    cid: str, kind: str = "identity-op", chain_id: str = "did:dfos:a", seq: int = 0
) -> LogEntry:
    return LogEntry(cid, f"tok.{cid}", kind, chain_id, seq)  # type: ignore[arg-type]


async def test_log_keeps_commit_order_across_batches(opened: RelayStore) -> None:
    await append(opened, op("z1"), op("a2"))
    await append(opened, op("m3"))
    page = await opened.read_log(None, 10)
    assert [e.cid for e in page.entries] == ["z1", "a2", "m3"]
    assert page.cursor is None
    assert await opened.log_length() == 3


async def test_log_pages_with_cursor_until_caught_up(opened: RelayStore) -> None:
    await append(opened, *[op(f"c{i:02d}") for i in range(7)])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await opened.read_log(cursor, 3)
        seen += [e.cid for e in page.entries]
        pages += 1
        if page.cursor is None:
            break
        assert page.cursor == page.entries[-1].cid
        cursor = page.cursor
    assert seen == [f"c{i:02d}" for i in range(7)]
    assert pages == 3


async def test_log_page_exactly_at_the_end_has_no_cursor(opened: RelayStore) -> None:
    await append(opened, op("c1"), op("c2"))
    page = await opened.read_log(None, 2)
    assert [e.cid for e in page.entries] == ["c1", "c2"]
    assert page.cursor is None
    empty = await opened.read_log("c2", 5)
    assert empty.entries == () and empty.cursor is None


async def test_log_entries_carry_token_kind_and_chain(opened: RelayStore) -> None:
    await append(opened, op("c1"), op("b1", kind="beacon", chain_id="did:dfos:a"))
    page = await opened.read_log(None, 5)
    assert page.entries == (entry("c1", seq=1), entry("b1", "beacon", seq=2))


async def test_commit_answers_the_head_seq_and_entries_carry_theirs(opened: RelayStore) -> None:
    assert await append(opened, op("c1"), op("c2")) == 2
    assert await commit(opened, CommitBatch(rejections=[])) == 2  # no ops: head unchanged
    assert await append(opened, op("c3", chain_id="did:dfos:b")) == 3
    page = await opened.read_log(None, 10)
    assert [(e.cid, e.seq) for e in page.entries] == [("c1", 1), ("c2", 2), ("c3", 3)]
    chain_page = await opened.read_chain_log("did:dfos:b", None, 10)
    assert [(e.cid, e.seq) for e in chain_page.entries] == [("c3", 3)]
    stored = await opened.get_operation("c2")
    assert stored is not None and stored.seq == 2
    async with opened.sequencing() as session:
        found = await session.get_operations(["c3"])
        rows = await session.read_state(StateQuery(cids=frozenset({"c1"})))
    assert found["c3"].seq == 3
    assert rows.operations["c1"].seq == 1


async def test_unknown_cursor_raises(opened: RelayStore) -> None:
    await append(opened, op("c1"))
    with pytest.raises(UnknownCursorError):
        await opened.read_log("nope", 5)


async def test_empty_log(opened: RelayStore) -> None:
    page = await opened.read_log(None, 5)
    assert page.entries == () and page.cursor is None
    assert await opened.log_length() == 0


async def test_chain_log_lists_only_chain_ops_of_that_chain(opened: RelayStore) -> None:
    await append(
        opened,
        op("i1", chain_id="did:dfos:a"),
        op("x1", kind="content-op", chain_id="content1"),
        op("b1", kind="beacon", chain_id="did:dfos:a"),
        op("a1", kind="artifact", chain_id="did:dfos:a", state=None),
        op("i2", chain_id="did:dfos:a", parent="i1"),
        op("i3", chain_id="did:dfos:b"),
        op("x2", kind="content-op", chain_id="content1", parent="x1"),
    )
    page = await opened.read_chain_log("did:dfos:a", None, 10)
    assert [e.cid for e in page.entries] == ["i1", "i2"]
    content = await opened.read_chain_log("content1", None, 10)
    assert [e.cid for e in content.entries] == ["x1", "x2"]
    assert (await opened.read_chain_log("did:dfos:zz", None, 10)).entries == ()


async def test_a_long_chain_log_pages_in_order(opened: RelayStore) -> None:
    # 40 ops, one commit at a time, another chain's op between: past the
    # lengths the memory store keeps in a tuple (issue 17)
    for i in range(40):
        await append(opened, op(f"i{i:02d}", chain_id="did:dfos:a"), op(f"o{i:02d}", "beacon"))
    cids, cursor = [], None
    while True:
        page = await opened.read_chain_log("did:dfos:a", cursor, 7)
        cids += [e.cid for e in page.entries]
        if (cursor := page.cursor) is None:
            break
    assert cids == [f"i{i:02d}" for i in range(40)]


async def test_chain_log_pages_and_checks_cursor_chain(opened: RelayStore) -> None:
    ops = [op(f"i{i}", chain_id="did:dfos:a") for i in range(5)]
    await append(opened, *ops[:2], op("j0", chain_id="did:dfos:b"), *ops[2:])
    first = await opened.read_chain_log("did:dfos:a", None, 2)
    assert [e.cid for e in first.entries] == ["i0", "i1"] and first.cursor == "i1"
    second = await opened.read_chain_log("did:dfos:a", first.cursor, 2)
    assert [e.cid for e in second.entries] == ["i2", "i3"] and second.cursor == "i3"
    last = await opened.read_chain_log("did:dfos:a", second.cursor, 2)
    assert [e.cid for e in last.entries] == ["i4"] and last.cursor is None
    with pytest.raises(UnknownCursorError):
        await opened.read_chain_log("did:dfos:a", "j0", 2)  # entry of another chain
    with pytest.raises(UnknownCursorError):
        await opened.read_chain_log("did:dfos:a", "nope", 2)
