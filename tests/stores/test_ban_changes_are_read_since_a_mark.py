"""Store contract: the bans written and lifted since a change mark, each
changed DID once as it stands now; nothing (and the same mark) when nothing
changed; every ban (``whole``) on the first read, or when the store's mark
is behind the one asked after. A change made through another handle on the
store (another process) is read like one's own."""

from __future__ import annotations

from dataclasses import replace

from stores.base import RelayStore
from stores.moderation import BanChanges, BanRecord
from tests.stores.conftest import reopen

SPAM = BanRecord("did:dfos:spam", "spam", 1_000, "did:dfos:op")
ABUSE = BanRecord("did:dfos:abuse", "abuse", 2_000, "did:dfos:op")


async def test_only_what_changed_since_the_mark_is_read(opened: RelayStore) -> None:
    first = await opened.ban_changes(0)
    assert first.whole and (first.banned, first.lifted) == ([], [])
    assert await opened.ban_changes(first.mark) == replace(first, whole=False)
    await opened.put_ban(SPAM)
    await opened.put_ban(ABUSE)
    both = await opened.ban_changes(first.mark)
    assert both.mark > first.mark and not both.whole and both.lifted == []
    assert sorted(both.banned, key=lambda b: b.did) == [ABUSE, SPAM]
    again = replace(SPAM, reason="spam, again", banned_at_ms=3_000)
    await opened.put_ban(again)
    await opened.delete_ban(ABUSE.did)
    await opened.put_ban(BanRecord("did:dfos:brief", "", 4_000, "did:dfos:op"))
    await opened.delete_ban("did:dfos:brief")
    changed = await opened.ban_changes(both.mark)
    assert changed.banned == [again]
    assert sorted(changed.lifted) == ["did:dfos:abuse", "did:dfos:brief"]
    assert await opened.delete_ban(ABUSE.did) is False  # no change: the mark stays
    assert await opened.ban_changes(changed.mark) == BanChanges(changed.mark)


async def test_every_ban_is_read_from_zero_or_from_beyond_the_stores_mark(
    opened: RelayStore,
) -> None:
    await opened.put_ban(SPAM)
    await opened.put_ban(ABUSE)
    await opened.delete_ban(ABUSE.did)
    for after in (0, 10**12):  # 10**12: a mark from a database restored since, say
        every = await opened.ban_changes(after)
        assert every.whole and every.banned == [SPAM]
        assert await opened.ban_changes(every.mark) == BanChanges(every.mark)


async def test_a_ban_through_another_handle_is_read_as_a_change(opened: RelayStore) -> None:
    mark = (await opened.ban_changes(0)).mark
    other = reopen(opened)  # another process on the store (memory: the same one)
    if other is not opened:
        await other.open()
    try:
        await other.put_ban(SPAM)
        changes = await opened.ban_changes(mark)
        assert changes.banned == [SPAM]
        await other.delete_ban(SPAM.did)
        assert (await opened.ban_changes(changes.mark)).lifted == [SPAM.did]
    finally:
        if other is not opened:
            await other.close()
