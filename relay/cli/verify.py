"""``dfos-relay verify-store [--store URL]``: the store's self-audit.

Rebuilds every chain from the stored ops through the protocol's
verification in log order and compares every row (``relay.audit``). Prints
one line per finding, then a summary, on stdout; progress on stderr when it
is a terminal. Exit 0 only for a clean store, 1 when anything was found or
the store cannot be read. It reads one snapshot and writes nothing, so it
runs against the store of a live relay without blocking its ingestion
(opening the store does apply pending schema migrations, like every command).
"""

from __future__ import annotations

import contextlib
import sqlite3

from relay.audit import audit_store
from relay.cli.progress import Progress


class VerifyError(Exception):
    """One line for the operator."""


async def holds_no_store(store: object) -> str | None:
    """Why ``store`` (opened, it would be migrated) holds no relay store yet,
    or None: a command that reads a store (an audit, the ledger) never
    creates one."""
    from stores.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        if not store.path.is_file():
            return f"no SQLite file at {store.path}"
        read_only = store.path.absolute().as_uri() + "?mode=ro"  # quotes '#', '?', '%'
        try:
            with contextlib.closing(sqlite3.connect(read_only, uri=True)) as db:
                found = db.execute(_SQLITE_VERSION_TABLE).fetchone()
        except sqlite3.Error as exc:
            return f"cannot read {store.path} as an SQLite database ({exc})"
        return None if found else f"no relay store in {store.path}"
    # only now: an SQLite audit does not load the Postgres driver
    from stores.postgres import PostgresStore, quoted_schema

    if isinstance(store, PostgresStore):
        import asyncpg

        settings = {"search_path": quoted_schema(store.schema)} if store.schema else {}
        try:
            conn = await asyncpg.connect(store.dsn, server_settings=settings, timeout=10)
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            return f"cannot reach Postgres: {exc}"
        try:
            found = await conn.fetchval("SELECT to_regclass('schema_version')")
        finally:
            await conn.close()
        where = f"schema {store.schema!r}" if store.schema else "the database's search path"
        return None if found else f"no relay store in {where}"
    return None


_SQLITE_VERSION_TABLE = (
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
)


async def verify_store_command(store_url: str, *, store_source: str) -> int:
    from relay.asgi import store_from_url
    from stores.base import StoreError

    store = store_from_url(store_url, store_source)
    absent = await holds_no_store(store)
    if absent is not None:
        raise VerifyError(f"store {store_url}: {absent} (nothing to audit; nothing was created)")
    progress = Progress("verify-store")
    try:
        await store.open()
        try:
            report = await audit_store(store, progress)
        finally:
            progress.close()
            await store.close()
    except StoreError as exc:
        raise VerifyError(f"store {store_url}: {exc}") from None
    for finding in report.findings:
        print(finding.line())
    summary = (
        f"verified {report.operations} operations in {report.chains} chains of {store_url}"
        f" ({report.purged} purged positions recorded): "
    )
    if report.clean:
        print(summary + "clean")
        return 0
    print(summary + f"{len(report.findings)} problems")
    return 1
