"""SQLite: reads that run on the event loop's thread instead of a hop (the
precheck's read before a session, a session's reads once it holds the write
lock) see the same data and leave locking to the threads that may wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

from stores.base import CommitBatch, IdentityKeyRecord, PendingOp, StateQuery
from stores.sqlite import SqliteStore
from tests.stores.conftest import append, op


async def test_precheck_read_takes_a_hop_when_the_inline_reader_fails(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "relay.db")
    await store.open()
    try:
        await append(store, op("c1"))
        key = IdentityKeyRecord("did:a", "k1", "z1")
        async with store.sequencing() as session:
            await session.commit(CommitBatch(identity_keys=[key]))
        assert await store.sequenced_and_keys({"c1", "c2"}, {"did:a"}) == (
            {"c1"},
            {"did:a": [key]},
        )
        assert store._inline is not None
        store._inline.close()  # any sqlite error there: the reader threads answer
        assert await store.sequenced_and_keys({"c1", "c2"}, {"did:a"}) == (
            {"c1"},
            {"did:a": [key]},
        )
    finally:
        await store.close()


async def test_later_session_reads_see_the_sessions_transaction(tmp_path: Path) -> None:
    """A second handle's session waits for the first's write lock, then its
    inline reads see what the first committed."""
    path = tmp_path / "relay.db"
    first, second = SqliteStore(path), SqliteStore(path)
    await first.open()
    await second.open()
    try:
        waiting = PendingOp("c2", "tok.c2", "op:c1", 5)
        async with first.sequencing() as session:
            assert (await session.read_state(StateQuery(cids=frozenset({"c1"})))).operations == {}
            later = asyncio.create_task(_read_in_session(second))
            await asyncio.sleep(0.2)
            assert not later.done()  # BEGIN IMMEDIATE is busy inline, waits in a hop
            await session.commit(
                CommitBatch(operations=[op("c1")], resolved_cids={"c1"}, waiting={"c2": waiting})
            )
        ops, taken, pending = await later
        assert set(ops) == {"c1"}
        assert [p.cid for p in taken] == ["c2"]
        assert pending == 1
    finally:
        await first.close()
        await second.close()


async def _read_in_session(store: SqliteStore) -> tuple[dict[str, object], list[PendingOp], int]:
    async with store.sequencing() as session:
        await session.read_state(StateQuery(count_pending=True))  # waits for the lock (a hop)
        rows = await session.read_state(StateQuery(cids=frozenset({"c1"})))  # inline
        taken = await session.take_waiting(["op:c1"])  # inline
        pending = await session.count_pending()  # inline
    return dict(rows.operations), taken, pending
