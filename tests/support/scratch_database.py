"""A scratch database on the test server, for tests that need what a schema
cannot give: database defaults (``ALTER DATABASE ... SET``), or ending every
connection to it (``pg_terminate_backend``) without touching other sessions'."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tests.support.backends import PG_URL


@asynccontextmanager
async def scratch_database(**defaults: str) -> AsyncIterator[str]:
    """The URL of a new database whose sessions default to ``defaults``
    (``ALTER DATABASE ... SET``); dropped on exit, with its connections."""
    name = f"scratch_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        for setting, value in defaults.items():
            await admin.execute(f'ALTER DATABASE "{name}" SET {setting} = {value}')
        yield urlunsplit(urlsplit(PG_URL)._replace(path=f"/{name}"))
    finally:
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def end_connections(url: str) -> int:
    """End every connection to ``url``'s database but this one (what a
    restart of the server does to them); how many were ended."""
    database = urlsplit(url).path.lstrip("/")
    admin = await asyncpg.connect(PG_URL)
    try:
        return int(
            await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                database,
            )
        )
    finally:
        await admin.close()
