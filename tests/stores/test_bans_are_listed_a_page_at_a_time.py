"""Store contract: bans list a page at a time, by DID after a cursor, and
a page's purge counts are read for that page's DIDs only, so ``GET
/admin/bans`` stays bounded however many bans and purge records there are."""

from __future__ import annotations

from dataclasses import replace

from stores.base import RelayStore
from stores.moderation import BanRecord, ModerationBatch
from tests.stores.conftest import append, op

DIDS = [f"did:dfos:b{i}" for i in range(5)]


async def test_bans_list_by_did_a_page_after_the_cursor(opened: RelayStore) -> None:
    for did in reversed(DIDS):
        await opened.put_ban(BanRecord(did, "spam", 1_000, "did:dfos:op"))
    first = await opened.list_bans(2)
    assert [b.did for b in first] == DIDS[:2]
    assert [b.did for b in await opened.list_bans(2, first[-1].did)] == DIDS[2:4]
    assert [b.did for b in await opened.list_bans(2, DIDS[3])] == DIDS[4:]
    assert await opened.list_bans(2, DIDS[4]) == []
    assert [b.did for b in await opened.list_bans(None, DIDS[1])] == DIDS[2:]
    assert [b.did for b in await opened.list_bans()] == DIDS  # no limit: every one


async def test_purge_counts_are_read_for_the_dids_asked_about(opened: RelayStore) -> None:
    mine = [op("g"), op("u", parent="g", at=2), op("s", "countersign", "g", at=3)]
    theirs = replace(op("t", chain_id="did:dfos:t", at=4), author_did="did:dfos:t")
    await append(opened, *mine, theirs)
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch("did:dfos:a", 1, operations=mine))
    async with opened.moderating() as session:
        await session.apply_moderation(ModerationBatch("did:dfos:t", 2, operations=[theirs]))
    assert await opened.count_purged(["did:dfos:a", "did:dfos:none"]) == {
        "did:dfos:a": {"identity-op": 2, "countersign": 1}
    }
    assert await opened.count_purged(["did:dfos:t"]) == {"did:dfos:t": {"identity-op": 1}}
    assert await opened.count_purged([]) == {}
