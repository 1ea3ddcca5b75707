"""The log's head (read by every commit and by each step of a purge) costs a
few index pages however many ops a purge took off the log's tail: on
Postgres those rows stay dead in the index until a VACUUM (autovacuum may be
off; a snapshot held by any reader keeps them), and a bare ``MAX(pos)``
walked every one of them, each step and each commit after the purge.
Counted in buffers by EXPLAIN ANALYZE, a snapshot held across the purge."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from stores.moderation import ModerationBatch
from stores.postgres import PostgresStore
from stores.sql.queries import HEAD_POS
from tests.stores.conftest import append, op
from tests.support.backends import make_store

pytestmark = pytest.mark.postgres

TAIL = 3000  # ops purged off the log's tail: several hundred index and heap pages
A = "did:dfos:a"


def buffers(plan: list[str]) -> int:
    """Shared buffers the whole statement touched (its top node's count)."""
    line = next(line for line in plan if "Buffers:" in line)
    return sum(int(part.split("=")[1]) for part in line.split() if "=" in part)


async def test_a_purged_tail_is_not_walked_to_read_the_head(tmp_path: Path) -> None:
    async with make_store("postgres", tmp_path) as store:
        assert isinstance(store, PostgresStore)
        await store.open()
        reader = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema})
        probe = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema})
        try:
            await append(store, op("keep", "content-op", "c0"))
            tail = [op(f"t{i}", "content-op", "c1", parent=f"t{i - 1}" if i else None)
                    for i in range(TAIL)]  # fmt: skip
            for i in range(0, TAIL, 500):
                await append(store, *tail[i : i + 500])
            # a reader's snapshot from before the purge: the purged rows stay
            await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            await reader.fetch("SELECT 1 FROM ops LIMIT 1")
            records = await store.operations_in_chains(["c1"])
            async with store.moderating() as session:
                await session.apply_moderation(ModerationBatch(A, 5, operations=records))
            plan = await probe.fetch(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT {HEAD_POS}")
            touched = buffers([r[0] for r in plan])
            assert touched < 20, "\n".join(r[0] for r in plan)
            assert await store.log_length() == TAIL + 1
        finally:
            await reader.close()
            await probe.close()
            await store.close()
