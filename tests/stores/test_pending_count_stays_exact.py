"""The number of buffered ops that wait (``count_pending``, and the count a
session's first read carries) is exact after every kind of buffer write:
ops parked, re-parked under another dependency, resolved, dropped by an
operator, written by a plain buffer insert, copies kept beside them and
gone (alone, or with their CID's op), and across a reopen. Postgres keeps
it in a row by triggers (schema v6, v7); a database written by v5 with ops
already waiting starts from their true count."""

from __future__ import annotations

import random

import pytest

from stores.base import CommitBatch, PendingOp, RelayStore, StateQuery
from stores.moderation import ModerationBatch
from stores.postgres import PostgresStore
from stores.sqlite import SqliteStore
from tests.stores.conftest import commit, op, write_old_database


async def _counts(store: RelayStore) -> tuple[int, int]:
    async with store.sequencing() as s:
        return await s.count_pending(), (
            await s.read_state(StateQuery(count_pending=True))
        ).pending or 0


async def _waiting(store: RelayStore) -> int:
    return sum(1 for p in await store.get_unsequenced(100_000) if p.waits_for)


async def test_the_count_follows_every_buffer_write(opened: RelayStore) -> None:
    rng = random.Random(7)
    parked: set[str] = set()
    sequenced: set[str] = set()
    copies: dict[str, set[str]] = {}  # CID -> token hashes of its copies
    for step in range(30):
        new = {f"w{step}-{i}" for i in range(rng.randint(0, 6))}
        moved = set(rng.sample(sorted(parked), min(len(parked), rng.randint(0, 3))))
        resolved = set(
            rng.sample(sorted(parked - moved), min(len(parked - moved), rng.randint(0, 4)))
        )
        waiting = {c: PendingOp(c, f"tok.{c}", f"op:p{step}") for c in new | moved}
        fresh = sorted(resolved - sequenced)
        # copies: new ones beside some ops (of a CID resolved now: not kept), some gone
        kept = sorted(parked | new)
        added = {(c, f"h{step}") for c in rng.sample(kept, min(len(kept), rng.randint(0, 3)))}
        held = sorted((c, h) for c, hashes in copies.items() for h in hashes)
        gone = set(rng.sample(held, min(len(held), rng.randint(0, 2))))
        await commit(
            opened,
            CommitBatch(
                operations=[op(c, chain_id=f"did:dfos:{c}") for c in fresh],
                resolved_cids=resolved,
                waiting=waiting,
                copies={key: PendingOp(key[0], f"tok.{key[1]}", "") for key in added},
                copies_gone=gone,
            ),
        )
        for c, h in added:
            copies.setdefault(c, set()).add(h)
        for c, h in gone:
            copies[c].discard(h)
        sequenced |= set(fresh)
        parked = (parked | new) - resolved
        if step % 7 == 3:  # received, not yet attempted: no dependency, not counted
            await opened.put_raw_ops([(f"r{step}", f"tok.r{step}")])
        if step % 10 == 9 and parked:  # an operator drops some
            dropped = set(rng.sample(sorted(parked), min(2, len(parked))))
            async with opened.moderating() as session:
                await session.apply_moderation(ModerationBatch(raw_cids=dropped))
            parked -= dropped
        copies = {c: hashes for c, hashes in copies.items() if c in parked}  # went with their op
        expected = len(parked) + sum(map(len, copies.values()))
        assert await _counts(opened) == (expected, expected)
        assert await _waiting(opened) == len(parked)


async def test_the_count_survives_a_reopen(opened: RelayStore) -> None:
    waiting = {c: PendingOp(c, f"tok.{c}", "did:dfos:x") for c in ("a", "b", "c")}
    await commit(opened, CommitBatch(waiting=waiting))
    await opened.close()
    await opened.open()
    assert await _counts(opened) == (3, 3)


async def test_a_v5_database_with_ops_waiting_starts_from_their_count(store: RelayStore) -> None:
    if not isinstance(store, SqliteStore | PostgresStore):
        pytest.skip("only durable stores have a schema")
    await write_old_database(
        store,
        5,
        "INSERT INTO raw_ops (cid, token, waits_for, taken) VALUES (?, ?, ?, 0), (?, ?, ?, 0), "
        "(?, ?, NULL, 0)",
        ("a", "tok.a", "did:dfos:x", "b", "tok.b", "op:p", "c", "tok.c"),
    )
    await store.open()
    try:
        assert await _counts(store) == (2, 2)
        await commit(store, CommitBatch(operations=[op("a")], resolved_cids={"a"}))
        assert await _counts(store) == (1, 1)
    finally:
        await store.close()
