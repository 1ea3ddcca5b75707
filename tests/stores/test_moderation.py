"""Store contract: bans persist, a moderation batch removes and rewrites
exactly what it names (atomically, recorded, with a new feed epoch), the
raw buffer keeps when each op arrived and drops only unsequenced ops, and
peer cursors list as the replication ledger."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from stores.base import (
    BeaconRecord,
    ChainRecord,
    CommitBatch,
    CountersignatureRecord,
    IdentityKeyRecord,
    PendingOp,
    RelayStore,
    StateQuery,
)
from stores.moderation import BanRecord, ModerationBatch, PurgedOperation
from tests.stores.conftest import append, chain, commit, is_durable, op, reopen

BAN = BanRecord("did:dfos:spam", "spam", 1_000, "did:dfos:op")


async def test_bans_are_upserted_listed_and_lifted(opened: RelayStore) -> None:
    assert await opened.list_bans() == []
    await opened.put_ban(BAN)
    await opened.put_ban(BanRecord("did:dfos:abc", "abuse", 2_000, "did:dfos:op"))
    again = replace(BAN, reason="spam, again", banned_at_ms=3_000)
    await opened.put_ban(again)
    assert [b.did for b in await opened.list_bans()] == ["did:dfos:abc", "did:dfos:spam"]
    assert (await opened.list_bans())[1] == again
    assert await opened.delete_ban("did:dfos:spam") is True
    assert await opened.delete_ban("did:dfos:spam") is False
    assert [b.did for b in await opened.list_bans()] == ["did:dfos:abc"]


async def test_a_sequencing_session_reads_the_bans_of_the_dids_it_asks_about(
    opened: RelayStore,
) -> None:
    """What the write gate judges signers by, under the sequencing lock:
    another process's ban stored before the session began is in it."""
    await opened.put_ban(BAN)
    other = reopen(opened)  # another process on the store (memory: the same one)
    if other is not opened:
        await other.open()
    try:
        await other.put_ban(BanRecord("did:dfos:abc", "", 2_000, "did:dfos:op"))
    finally:
        if other is not opened:
            await other.close()
    query = StateQuery(ban_dids=frozenset({"did:dfos:spam", "did:dfos:abc", "did:dfos:ok"}))
    async with opened.sequencing() as s:
        assert (await s.read_state(query)).bans == {"did:dfos:spam": "spam", "did:dfos:abc": ""}
        assert await s.get_bans(["did:dfos:ok"]) == {}
        # with the session's other reads, in the same statement on Postgres
        rows = await s.read_state(replace(query, cids=frozenset({"x"}), count_pending=True))
        assert rows.bans == {"did:dfos:spam": "spam", "did:dfos:abc": ""}
        assert (await s.read_state(StateQuery(cids=frozenset({"x"})))).bans == {}


async def test_bans_survive_a_restart(opened: RelayStore) -> None:
    await opened.put_ban(BAN)
    if not is_durable(opened):
        return
    await opened.close()
    again = reopen(opened)
    await again.open()
    try:
        assert await again.list_bans() == [BAN]
    finally:
        await again.close()
    await opened.open()


async def test_ops_by_signer_and_by_chain(opened: RelayStore) -> None:
    mine = replace(op("c2", "content-op", "content1", at=2), author_did="did:dfos:b")
    await append(opened, op("g"), mine, op("s1", "countersign", "g", at=3))
    assert [o.cid for o in await opened.operations_signed_by("did:dfos:b")] == ["c2"]
    assert (await opened.operations_signed_by("did:dfos:b"))[0].seq == 2
    assert [o.cid for o in await opened.operations_signed_by("did:dfos:a")] == ["g", "s1"]
    found = await opened.operations_in_chains(["g", "content1"])
    assert [o.cid for o in found] == ["c2", "s1"]
    assert await opened.operations_in_chains([]) == []


async def _world(store: RelayStore) -> None:
    """did:dfos:a with two identity ops, a beacon, a countersigned op; did:dfos:b."""
    g, u = op("g", at=1), op("u", parent="g", at=2)
    b = op("b1", "beacon", "did:dfos:a", at=3)
    other = replace(op("h", "identity-op", "did:dfos:b", at=4), author_did="did:dfos:b")
    sig = replace(op("s", "countersign", "h", at=5), author_did="did:dfos:a")
    await append(store, g, u, b, other, sig)
    await commit(
        store,
        CommitBatch(
            chains={"did:dfos:a": chain("did:dfos:a", "u"), "did:dfos:b": chain("did:dfos:b", "h")},
            identity_keys=[IdentityKeyRecord("did:dfos:a", "k1", "z6Mk1")],
            beacons={"did:dfos:a": BeaconRecord("did:dfos:a", "b1", "tok.b1", 3)},
            countersignatures=[CountersignatureRecord("h", "did:dfos:a", "s", "tok.s")],
        ),
    )
    await store.put_blob("did:dfos:a", "doc", b"x")
    await store.put_blob("did:dfos:b", "doc", b"y")


async def test_a_purge_removes_what_it_names_and_records_it(opened: RelayStore) -> None:
    await _world(opened)
    epoch = await opened.get_feed_epoch()
    doomed = [await opened.get_operation(c) for c in ("g", "u", "b1", "s")]
    batch = ModerationBatch(
        purged_did="did:dfos:a",
        at_ms=9_000,
        operations=[o for o in doomed if o is not None],
        chains_removed={"did:dfos:a"},
        chains_rewound=[chain("did:dfos:b", "h", at=4, rewound=True)],
        dids_removed={"did:dfos:a"},
    )
    async with opened.moderating() as session:
        assert await session.apply_moderation(batch) == 0
    for cid in ("g", "u", "b1", "s"):
        assert await opened.get_operation(cid) is None
    assert await opened.get_operation("h") is not None
    assert await opened.get_chain("did:dfos:a") is None
    assert (await opened.get_chain("did:dfos:b")) == chain("did:dfos:b", "h", at=4, rewound=True)
    assert await opened.get_identity_keys(["did:dfos:a"]) == {}
    assert await opened.get_beacon("did:dfos:a") is None
    assert await opened.get_countersignatures("h") == []
    assert await opened.get_blob("did:dfos:a", "doc") is None
    assert await opened.get_blob("did:dfos:b", "doc") == b"y"
    # the log skips purged positions; the rest keep theirs
    assert [(e.cid, e.seq) for e in (await opened.read_log(None, 10)).entries] == [("h", 4)]
    assert [e.cid for e in await opened.read_seq_range(0, 10, 10)] == ["h"]
    assert [e.cid for e in await opened.read_roots(10, None, 10)] == ["h"]
    assert (await opened.read_chain_log("did:dfos:a", None, 10)).entries == ()
    purged = await opened.list_purged("did:dfos:a")
    assert [(p.seq, p.cid) for p in purged] == [(1, "g"), (2, "u"), (3, "b1"), (5, "s")]
    a = "did:dfos:a"
    assert purged[3] == PurgedOperation(5, "s", "countersign", "h", a, a, 9_000)
    assert await opened.list_purged("did:dfos:b") == []
    assert len(await opened.list_purged()) == 4
    assert await opened.get_feed_epoch() != epoch  # followers must bootstrap again


async def test_a_log_page_steps_over_purged_positions(opened: RelayStore) -> None:
    await append(opened, *[op(f"c{i}", at=i + 1) for i in range(6)])
    doomed = [o for c in ("c1", "c2") if (o := await opened.get_operation(c)) is not None]
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch("did:dfos:a", 1, operations=doomed))
    first = await opened.read_log(None, 2)
    assert [e.cid for e in first.entries] == ["c0", "c3"] and first.cursor == "c3"
    rest = await opened.read_log(first.cursor, 10)
    assert [e.cid for e in rest.entries] == ["c4", "c5"] and rest.cursor is None
    assert [e.cid for e in await opened.read_seq_range(0, 6, 2)] == ["c0", "c3"]


async def test_a_purged_position_is_never_given_to_a_new_op(opened: RelayStore) -> None:
    await append(opened, *[op(f"c{i}", at=i + 1) for i in range(4)])
    doomed = [o for c in ("c2", "c3") if (o := await opened.get_operation(c)) is not None]
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch("did:dfos:a", 1, operations=doomed))
    assert await opened.log_length() == 4  # the head stays where the purged ops were
    async with opened.sequencing() as session:
        assert await session.commit(CommitBatch(operations=[op("c4", at=5)])) == 5
    assert [(e.cid, e.seq) for e in await opened.read_seq_range(0, 10, 10)] == [
        ("c0", 1), ("c1", 2), ("c4", 5),
    ]  # fmt: skip
    assert [p.seq for p in await opened.list_purged()] == [3, 4]
    if is_durable(opened):  # the head is read again from the files
        await opened.close()
        again = reopen(opened)
        await again.open()
        try:
            assert await again.log_length() == 5
        finally:
            await again.close()
        await opened.open()


async def test_a_moderation_session_that_is_not_applied_changes_nothing(
    opened: RelayStore,
) -> None:
    await append(opened, op("g"))
    async with opened.moderating():
        pass
    assert await opened.get_operation("g") is not None


async def test_raw_ops_keep_their_arrival_time_and_drop_only_if_unsequenced(
    opened: RelayStore,
) -> None:
    await opened.put_raw_ops([("w1", "tok.w1"), ("w2", "tok.w2")], received_at_ms=1_000)
    await opened.put_raw_ops([("w1", "tok.w1"), ("w3", "tok.w3")], received_at_ms=5_000)
    await commit(opened, CommitBatch(waiting={"w2": PendingOp("w2", "tok.w2", "op:x")}))
    pending = {p.cid: p for p in await opened.get_unsequenced(10)}
    assert {c: p.received_at_ms for c, p in pending.items()} == {
        "w1": 1_000, "w2": 1_000, "w3": 5_000,
    }  # fmt: skip
    assert pending["w2"].waits_for == "op:x"
    await append(opened, op("g"))
    async with opened.moderating() as session:
        dropped = await session.apply_moderation(ModerationBatch(raw_cids={"w1", "w2", "g", "zz"}))
    assert dropped == 2
    assert [p.cid for p in await opened.get_unsequenced(10)] == ["w3"]
    assert await opened.count_unsequenced() == 1
    async with opened.sequencing() as s:
        assert await s.count_pending() == 0
        assert await s.take_waiting(["op:x"]) == []
    assert await opened.get_operation("g") is not None


async def test_peer_cursors_list_as_the_replication_ledger(opened: RelayStore) -> None:
    assert await opened.list_peer_cursors() == {}
    await opened.set_peer_cursor("https://b", "c2")
    await opened.set_peer_cursor("https://a#changes", "e.7")
    await opened.set_peer_cursor("https://b", "c3")
    assert await opened.list_peer_cursors() == {"https://a#changes": "e.7", "https://b": "c3"}


async def test_the_chain_record_helper_is_plain(opened: RelayStore) -> None:
    # guards the fixture's meaning: a rewound chain is a plain upsert
    record = ChainRecord("did:dfos:z", "identity", "g", "g", 1, {})
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch(chains_rewound=[record]))
    assert await opened.get_chain("did:dfos:z") == record


async def test_an_empty_moderation_batch_is_a_no_op(opened: RelayStore) -> None:
    await append(opened, op("g"))
    async with opened.moderating() as session:
        assert await session.apply_moderation(ModerationBatch()) == 0
    assert await opened.log_length() == 1
    assert await append(opened, op("h", at=2)) == 2  # the store still writes


async def test_a_write_the_backend_cannot_encode_leaves_the_store_writable(
    opened: RelayStore,
) -> None:
    """A lone surrogate is no sqlite3 error: it must still roll the write back."""
    with contextlib.suppress(Exception):  # refusing it is fine; being stuck mid-write is not
        await opened.put_ban(BanRecord("did:dfos:odd", "a\ud800b", 1_000, "did:dfos:op"))
    await opened.put_ban(BAN)
    assert BAN in await opened.list_bans()
