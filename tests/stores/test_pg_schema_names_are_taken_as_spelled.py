"""A Postgres ``?schema=`` names one schema exactly as spelled: case, quotes,
commas and spaces are part of the name, not syntax of the search path or of
CREATE SCHEMA. A name Postgres would cut (over 63 bytes) or refuse (NUL) is
an error before anything is opened."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import asyncpg
import pytest

from stores.base import StoreError
from stores.factory import open_store_from_url
from stores.postgres import PostgresStore
from tests.cli.test_command_lines import assert_one_line_failure, run
from tests.support.backends import PG_URL, drop_pg_schema

from .test_startup_errors import needs_pg

SPELLINGS = ["Mixed{}", 'quo"te{}', "com,ma{}", "spa ce{}"]


async def _tables_in(schema: str) -> int:
    conn = await asyncpg.connect(PG_URL)
    try:
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'ops'", schema
        )
    finally:
        await conn.close()
    return int(found)


@needs_pg
@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_a_schema_is_created_and_used_as_spelled(spelling: str) -> None:
    schema = spelling.format(uuid.uuid4().hex[:8])
    store = open_store_from_url(f"{PG_URL}?schema={quote(schema)}")
    assert isinstance(store, PostgresStore)
    try:
        await store.open()
        assert await store.log_length() == 0
        await store.close()
        assert await _tables_in(schema) == 1
        assert await _tables_in(schema.lower()) == 0 or schema == schema.lower()
    finally:
        await store.close()
        await drop_pg_schema(schema)


@needs_pg
async def test_two_spellings_differing_in_case_are_two_stores() -> None:
    upper = f"Case{uuid.uuid4().hex[:8]}"
    stores = [PostgresStore(PG_URL, schema=name) for name in (upper, upper.lower())]
    try:
        for store in stores:
            await store.open()
        epochs = [await store.get_feed_epoch() for store in stores]
        assert epochs[0] != epochs[1]
        assert [await _tables_in(name) for name in (upper, upper.lower())] == [1, 1]
    finally:
        for store in stores:
            await store.close()
        for name in (upper, upper.lower()):
            await drop_pg_schema(name)


@pytest.mark.parametrize("schema", ["x" * 64, "é" * 32, "nul\0inside"])
def test_a_name_postgres_would_cut_or_refuse_is_an_error(schema: str) -> None:
    with pytest.raises(StoreError, match="schema name"):
        open_store_from_url(f"{PG_URL}?schema={quote(schema)}")


def test_the_command_line_says_so_in_one_line() -> None:
    done = run("verify-store", "--store", f"{PG_URL}?schema={'x' * 64}", timeout=60)
    line = assert_one_line_failure(done, "verify-store")
    assert done.returncode == 2 and "1 to 63 bytes" in line, line
