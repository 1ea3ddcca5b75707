"""The write gate's ban list, refreshed when stale before each ingest,
reads the bans that changed since its last read, not every ban: with many
bans and no change, a stale refresh reads no ban row. A ban and an unban
written by another worker sharing the store are seen at the first refresh
after ``BAN_REFRESH_S``, by reading those rows alone. Every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from relay.admin.bans import BAN_REFRESH_S, BanList
from stores.base import RelayStore
from stores.moderation import BanRecord
from tests.stores.conftest import reopen

if TYPE_CHECKING:
    from stores.moderation import BanChanges

BANS = 300


class CountingBans:
    """The store's ban reads, counting the ban rows they return."""

    def __init__(self, store: RelayStore) -> None:
        self.store = store
        self.rows = 0

    async def ban_changes(self, after: int) -> BanChanges:
        changes = await self.store.ban_changes(after)
        self.rows += len(changes.banned) + len(changes.lifted)
        return changes

    async def list_bans(
        self, limit: int | None = None, after: str | None = None
    ) -> list[BanRecord]:
        bans = await self.store.list_bans(limit, after)
        self.rows += len(bans)
        return bans


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def banned(store: RelayStore) -> AsyncIterator[RelayStore]:
    """The store, opened, with ``BANS`` bans."""
    await store.open()
    try:
        for i in range(BANS):
            await store.put_ban(BanRecord(f"did:dfos:spam{i:04}", "spam", 1_000, "did:dfos:op"))
        yield store
    finally:
        await store.close()


async def test_a_stale_refresh_with_no_change_reads_no_ban(banned: RelayStore) -> None:
    reads, clock = CountingBans(banned), Clock()
    bans = BanList(reads, clock=clock)
    await bans.refresh()
    assert reads.rows == BANS and bans.lookup("did:dfos:spam0007") == "spam"
    for _ in range(3):
        clock.now += BAN_REFRESH_S
        await bans.refresh_if_stale()
    assert reads.rows == BANS  # before: BANS more per stale refresh
    assert len(bans.records()) == BANS


async def test_another_workers_ban_and_unban_are_seen_by_their_rows_alone(
    banned: RelayStore,
) -> None:
    reads, clock = CountingBans(banned), Clock()
    bans = BanList(reads, clock=clock)
    await bans.refresh()
    worker = reopen(banned)  # another worker on the store (memory: the same one)
    if worker is not banned:
        await worker.open()
    try:
        await worker.put_ban(BanRecord("did:dfos:new", "abuse", 2_000, "did:dfos:op"))
        await worker.delete_ban("did:dfos:spam0001")
        clock.now += BAN_REFRESH_S / 2
        await bans.refresh_if_stale()  # fresh: not read yet
        assert bans.lookup("did:dfos:new") is None
        clock.now += BAN_REFRESH_S / 2
        await bans.refresh_if_stale()
    finally:
        if worker is not banned:
            await worker.close()
    assert bans.lookup("did:dfos:new") == "abuse"
    assert bans.lookup("did:dfos:spam0001") is None
    assert reads.rows == BANS + 2
