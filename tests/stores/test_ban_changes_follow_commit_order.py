"""Ban change marks follow commit order on Postgres, whoever writes: while
one writer's ban is uncommitted, another's waits for a mark, so a reader
never takes a later mark first and skips the earlier ban when it commits.
(SQLite writers hold the file's write lock for their whole transaction.)"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from stores.base import RelayStore
from stores.moderation import BanRecord
from stores.postgres import PostgresStore
from stores.sql.dialect import POSTGRES

INSERT = "INSERT INTO bans (did, reason, banned_at_ms, banned_by) VALUES (?, 'spam', 1, 'op')"


async def test_a_ban_committed_later_does_not_take_an_earlier_mark(store: RelayStore) -> None:
    if not isinstance(store, PostgresStore):
        pytest.skip("Postgres: writers that commit concurrently")
    await store.open()
    first = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema or ""})
    try:
        mark = (await store.ban_changes(0)).mark
        slow = first.transaction()
        await slow.start()
        await first.execute(POSTGRES.render(INSERT), "did:dfos:slow")
        fast = asyncio.create_task(store.put_ban(BanRecord("did:dfos:fast", "x", 2, "op")))
        await asyncio.sleep(0.3)
        assert not fast.done()  # waits for the slow writer's mark to commit
        assert (await store.ban_changes(mark)).banned == []
        await slow.commit()
        await fast
        changes = await store.ban_changes(mark)
        assert sorted(b.did for b in changes.banned) == ["did:dfos:fast", "did:dfos:slow"]
    finally:
        await first.close()
        await store.close()
