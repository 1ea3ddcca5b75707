"""Store contract: the audit snapshot returns every row of every table as
stored, pages through big tables, sees one commit throughout, and never
blocks a writer while it is open."""

from __future__ import annotations

import asyncio

from stores.audit import AUDIT_PAGE
from stores.base import (
    BeaconRecord,
    CommitBatch,
    CountersignatureRecord,
    IdentityKeyRecord,
    PendingOp,
    RelayStore,
)
from stores.moderation import ModerationBatch
from tests.stores.conftest import append, chain, commit, op


async def test_every_table_is_reported(opened: RelayStore) -> None:
    await append(opened, op("g", at=1), op("s", "countersign", "g", at=2))
    await commit(
        opened,
        CommitBatch(
            chains={"did:dfos:a": chain("did:dfos:a", "g")},
            identity_keys=[IdentityKeyRecord("did:dfos:a", "k1", "z6Mk1")],
            beacons={"did:dfos:a": BeaconRecord("did:dfos:a", "b", "tok.b", 3)},
            countersignatures=[CountersignatureRecord("g", "did:dfos:w", "s", "tok.s")],
            waiting={"w": PendingOp("w", "tok.w", "op:x")},
        ),
    )
    await opened.put_blob("did:dfos:a", "doc", b"x")
    gone = await opened.get_operation("s")
    assert gone is not None
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch("did:dfos:w", 7, operations=[gone]))
    async with opened.audit_snapshot() as snap:
        assert await snap.count_operations() == 1
        assert [(o.seq, o.cid, o.jws_token) async for o in snap.operations()] == [(1, "g", "tok.g")]
        assert [c.chain_id async for c in snap.chains()] == ["did:dfos:a"]
        assert [k async for k in snap.identity_keys()] == [
            IdentityKeyRecord("did:dfos:a", "k1", "z6Mk1")
        ]
        assert [b.cid async for b in snap.beacons()] == ["b"]
        assert [s async for s in snap.countersignatures()] == []
        assert [b async for b in snap.blob_keys()] == [("did:dfos:a", "doc")]
        assert [(p.cid, p.waits_for) async for p in snap.raw_ops()] == [("w", "op:x")]
        assert [(p.seq, p.cid) for p in await snap.purged()] == [(2, "s")]


async def test_big_tables_page(opened: RelayStore) -> None:
    n = AUDIT_PAGE + 5
    await append(opened, *[op(f"c{i:05d}", at=i + 1) for i in range(n)])
    chains = {f"d{i:05d}": chain(f"d{i:05d}", "g") for i in range(n)}
    await commit(opened, CommitBatch(chains=chains))
    async with opened.audit_snapshot() as snap:
        seqs = [o.seq async for o in snap.operations()]
        assert seqs == list(range(1, n + 1))
        assert len([c async for c in snap.chains()]) == n


async def test_the_snapshot_sees_one_commit_and_blocks_no_writer(opened: RelayStore) -> None:
    await append(opened, op("c1", at=1))
    async with opened.audit_snapshot() as snap:
        assert await snap.count_operations() == 1
        # a sequencing session commits while the snapshot is open
        await asyncio.wait_for(append(opened, op("c2", at=2)), timeout=10)
        await asyncio.wait_for(opened.put_raw_ops([("w", "tok.w")]), timeout=10)
        if type(opened).__name__ != "MemoryStore":  # memory copies at open: same answer
            assert [o.cid async for o in snap.operations()] == ["c1"]
            assert [p async for p in snap.raw_ops()] == []
    assert await opened.log_length() == 2
