"""The suite's own Postgres schemas (``tests.support.backends.pg_schema``): a
test's schema is dropped after it, off its path (leaving it does not wait
for the DROP, which the next test would), and it is gone once the session
waits for the drops, as it does at its end."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from stores.postgres import quoted_schema
from tests.support.backends import PG_URL, pg_schema, selected_backends, wait_for_schema_drops

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected"),
]

LEAVE_BOUND_S = 2.0  # an inline DROP would wait for the lock as long as it is held


async def schema_exists(conn: asyncpg.Connection, schema: str) -> bool:
    return bool(
        await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema)
    )


async def test_a_schema_is_dropped_after_its_test_without_the_test_waiting() -> None:
    holder = await asyncpg.connect(PG_URL)
    try:

        async def a_test() -> str:
            async with pg_schema() as schema:
                table = f"{quoted_schema(schema)}.t"
                await holder.execute(f"CREATE SCHEMA {quoted_schema(schema)}")
                await holder.execute(f"CREATE TABLE {table} (n INTEGER)")
                # a lock the DROP must wait for, held past the test's end
                await holder.execute(f"BEGIN; SELECT * FROM {table}")
            return schema

        schema = await asyncio.wait_for(a_test(), LEAVE_BOUND_S)
        assert await schema_exists(holder, schema)  # its drop waits for the lock
        await holder.execute("ROLLBACK")
        left = await asyncio.to_thread(wait_for_schema_drops, 60.0)
        assert schema not in left
        assert not await schema_exists(holder, schema)
    finally:
        await holder.close()
