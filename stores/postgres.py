"""Postgres store on asyncpg: a relay on a shared database.

Several relay processes (e.g. ``hypercorn --workers 2``) may share one
database, optionally inside a named schema (``?schema=`` in the URL).

Serialization. A sequencing session acquires a pool connection, BEGINs and
takes ``pg_advisory_xact_lock(LOCK_CLASS, hashtext(current_schema()))``
before its first read, so chain-state read-modify-write is serialized across
every process on the same schema; the lock is released by COMMIT/ROLLBACK.
Two processes ingesting forks of one chain therefore run one after the other
and pick the same heads a single process would.

Log positions. Positions are ``head + 1, + 2, ...`` (the head: ``MAX(pos)``
over live and purged ops) read *under that lock* (READ COMMITTED: each
statement sees everything committed before it), so they are gapless, never
given twice, and assigned in commit order. A session can only assign
positions after the previous session committed and released the lock, hence
no transaction ever commits a position lower than one already visible: a
reader paging ``GET /log`` by position never skips an entry.

An audit (``verify-store``) reads in one READ ONLY REPEATABLE READ
transaction on its own pool connection: one snapshot for every table, no
locks beyond ACCESS SHARE, so it never blocks ingestion.

Durability. Sessions run with ``synchronous_commit=on`` unless the URL's
query names it (the server's default does not decide). With ``off`` a
crash of the server may lose the last commits, and a failover to a standby
that had not received them loses them in any case: every new connection
first checks whether the server restarted since, or lost commits this
process knew of (``stores.postgres_server_start``), and a new feed epoch is
started if so; this process's feed is told (``watch_epoch``) before the
connection is used. What it knows is kept in memory where it learns a seq
anyway (a commit's new head, a head read), never by another round trip.

Pushed commits. A session that assigned positions NOTIFYs the new head on
the log's channel with its COMMIT; ``watch_commits`` LISTENs on a
connection of its own, kept (retried when it fails at first, reconnected
when lost) by ``stores.postgres_listen``.

Every batch is one transaction. The schema is created or migrated on
``open()`` under a second advisory lock (concurrent starts are safe); a
newer schema version or an unreachable server is a ``StoreError`` naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from stores.base import StoreError
from stores.leases import HandedOut, Lease, check_lease_name
from stores.postgres_errors import CONNECTION_ERRORS
from stores.postgres_lease import AdvisoryLease
from stores.postgres_listen import APPLICATION_NAME, CommitListener
from stores.postgres_server_start import Known, check_server_start
from stores.sql.audit import SqlAuditSnapshot
from stores.sql.conn import Conn, PagedConn
from stores.sql.dialect import POSTGRES
from stores.sql.rows import Row
from stores.sql.schema import READ_VERSION, VERSION_TABLE, pending_migrations
from stores.sql.session import SqlSession
from stores.sql.store import SqlStore

LOCK_CLASS = 0x0DF0  # advisory lock class for chain-state sequencing
MIGRATE_CLASS = 0x0DF1  # advisory lock class for schema migration
# (0x0DF2: leases, stores.postgres_lease)
POOL_MIN, POOL_MAX = 1, 10
CONNECT_TIMEOUT_S = 10.0
SEQUENCE_LOCK = f"SELECT pg_advisory_xact_lock({LOCK_CLASS}, hashtext(current_schema()))"


def split_schema(url: str) -> tuple[str, str | None]:
    """Remove ``schema=`` from the URL query (asyncpg would pass it on)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def check_schema_name(name: str) -> str:
    """``name`` as given, or a ``StoreError``: Postgres cuts identifiers at
    63 bytes, so two longer names would share one schema under two lease
    keys and two NOTIFY channels, and it refuses NUL."""
    if "\0" in name or not 0 < len(name.encode()) <= 63:
        raise StoreError(f"Postgres schema name {name!r} must be 1 to 63 bytes, without NUL")
    return name


def quoted_schema(name: str) -> str:
    """The schema as a quoted identifier, spelled exactly as given: unquoted,
    ``MySchema`` would be folded to ``myschema`` in the search path, and a
    ``"`` or ``,`` in the name would be read as syntax."""
    return '"' + name.replace('"', '""') + '"'


def url_settings(url: str) -> set[str]:
    """The server settings the URL's query names (asyncpg passes each on)."""
    return {k for k, _ in parse_qsl(urlsplit(url).query)}


def session_defaults(url: str) -> dict[str, str]:
    """The settings the relay runs with unless the URL's query names them:
    they must not depend on the server's defaults (postgresql.conf, ALTER
    DATABASE/ROLE ... SET), which a query setting overrides and these do too."""
    named = url_settings(url)
    out = {}
    if "synchronous_commit" not in named:
        # A commit the relay answered must survive a crash of the database
        # host unless the operator chose otherwise in the URL: a server whose
        # default is off would silently lose the last commits and give their
        # seqs again.
        out["synchronous_commit"] = "on"
    if "plan_cache_mode" not in named:
        # The sequencing reads take arrays whose sizes vary round to round
        # and a raw-op buffer that swells and drains; a cached generic plan
        # read a shuffled stream ~1.6x slower (bench/README.md).
        out["plan_cache_mode"] = "force_custom_plan"
    if "jit" not in named:
        # JIT compiles when a plan's cost estimate is high, and estimates over
        # a buffer table that fills before autovacuum analyses it are wild:
        # a 0.1 ms recursive buffer read spent ~170 ms compiling.
        out["jit"] = "off"
    return out


def _where(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    return f"{host}:{parts.port or 5432}/{parts.path.lstrip('/') or '(default db)'}"


class _PgConn:
    """``Conn`` over one asyncpg connection; driver errors become StoreError."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with _as_store_errors():
            return list(await self.conn.fetch(sql, *params))

    async def fetch_pages(
        self, sql: str, params: Sequence[Any], size: int
    ) -> AsyncGenerator[list[Row], None]:
        # a server-side cursor (it needs a transaction): one statement, read
        # ``size`` rows a round trip, not the whole answer decoded at once
        with _as_store_errors():
            async with self.conn.transaction(readonly=True):
                cursor = await self.conn.cursor(sql, *params)
                while True:
                    rows = await cursor.fetch(size)
                    if rows:
                        yield list(rows)
                    if len(rows) < size:
                        return

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with _as_store_errors():
            await self.conn.execute(sql, *params)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with _as_store_errors():
            await self.conn.executemany(sql, rows)


@contextlib.contextmanager
def _as_store_errors() -> Iterator[None]:
    """Driver errors (the server gone or restarting, a connection closed
    under us) become ``StoreError``, the one failure callers that must
    outlive a backend outage catch."""
    try:
        yield
    except CONNECTION_ERRORS as exc:
        raise StoreError(f"Postgres error: {exc}") from exc


@asynccontextmanager
async def _connection(pool: Any, transaction: bool = False) -> AsyncIterator[Any]:
    """A pool connection (in a transaction if asked): taking one may open a
    new connection, and a transaction's start and end are round trips, so
    each of them fails as a statement does."""
    with _as_store_errors():
        async with pool.acquire() as raw:
            if not transaction:
                yield raw
                return
            async with raw.transaction():
                yield raw


class PostgresStore(SqlStore):
    """A ``RelayStore`` in a Postgres database (optionally one schema of it)."""

    def __init__(self, url: str, schema: str | None = None, pool_max: int = POOL_MAX) -> None:
        super().__init__(POSTGRES)
        dsn, url_schema = split_schema(url)
        self.dsn = dsn
        named = schema or url_schema
        self.schema = check_schema_name(named) if named else None
        self._pool_max = pool_max
        self._pool: Any = None
        self._leases = HandedOut()
        self._migrated = False  # new connections check the server start once it is
        self._server_start: datetime | None = None  # as this process last saw it
        self._known_seq = 0  # the highest seq it saw committed under that start
        self._epoch_watchers: list[Callable[[], None]] = []
        self._listeners: set[CommitListener] = set()  # watch_commits not yet stopped

    # lifecycle -------------------------------------------------------------
    async def open(self) -> None:
        if self._pool is not None:
            return
        settings = self._server_settings()
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=POOL_MIN,
                max_size=self._pool_max,
                timeout=CONNECT_TIMEOUT_S,
                server_settings=settings,
                init=self._connected,
            )
        except CONNECTION_ERRORS as exc:
            raise StoreError(f"cannot reach Postgres at {_where(self.dsn)}: {exc}") from exc
        self._pool = pool
        try:
            await self._migrate()
            self._migrated = True
            async with _connection(pool) as raw:  # opened before the table was there
                await self._see_server(_PgConn(raw))
        except BaseException:
            await self.close()
            raise

    def _server_settings(self) -> dict[str, str]:
        settings = {"search_path": quoted_schema(self.schema)} if self.schema else {}
        settings.update(session_defaults(self.dsn))
        return settings

    async def _migrate(self) -> None:
        async with _connection(self._pool, transaction=True) as raw:
            conn = _PgConn(raw)
            await conn.execute(f"SELECT pg_advisory_xact_lock({MIGRATE_CLASS}, 0)")
            if self.schema:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted_schema(self.schema)}")
            await conn.execute(VERSION_TABLE)
            current = (await conn.fetch(READ_VERSION))[0][0]
            where = f"Postgres database {_where(self.dsn)}" + (
                f" schema {self.schema}" if self.schema else ""
            )
            for step in pending_migrations(current, POSTGRES, where):
                for stmt in step:
                    await conn.execute(stmt)

    async def _connected(self, raw: Any) -> None:
        """Every new pool connection, before its first use: the server may
        have restarted since the last (``stores.postgres_server_start``)."""
        if self._migrated:
            await self._see_server(_PgConn(raw))

    async def _see_server(self, conn: Conn) -> None:
        where = f"Postgres database {_where(self.dsn)}" + (
            f" schema {self.schema}" if self.schema else ""
        )
        known = Known(self._server_start, self._known_seq)
        seen = await check_server_start(conn, where, known)
        before, self._server_start = self._server_start, seen.started
        if before != seen.started and seen.first_head is not None:
            # the first check of this process on this start: seqs it knew past
            # the head there were lost (and the epoch changed): given again
            self._known_seq = min(self._known_seq, seen.first_head)
        if seen.new_epoch is not None or before not in (None, seen.started):
            # whoever started a new epoch (this check, another connection or
            # process), this process learns it before using the connection
            for watcher in self._epoch_watchers:
                watcher()

    def _saw_committed(self, seq: int) -> None:
        self._known_seq = max(self._known_seq, seq)

    async def log_length(self) -> int:
        head = await super().log_length()
        self._saw_committed(head)  # read through a checked connection
        return head

    def watch_epoch(self, on_doubt: Callable[[], None]) -> None:
        self._epoch_watchers.append(on_doubt)

    @property
    def _channel(self) -> str:
        """The NOTIFY channel of this log (one per schema)."""
        suffix = hashlib.sha256((self.schema or "").encode()).hexdigest()[:16]
        return f"dfos_relay_log_{suffix}"

    async def watch_commits(
        self, on_head: Callable[[int], None], on_listening: Callable[[bool], None]
    ) -> Callable[[], Awaitable[None]] | None:
        listener = CommitListener(
            self._listen_connection,
            self._channel,
            self._q.max_pos,
            on_head,
            on_listening,
            _where(self.dsn),
        )
        await listener.start()
        self._listeners.add(listener)

        async def stop() -> None:
            self._listeners.discard(listener)
            await listener.stop()

        return stop

    async def _listen_connection(self) -> Any:
        """A connection outside the pool (it LISTENs, and reads the head
        when it LISTENs again: not through the pool, whose connections the
        same network blip may have left hanging)."""
        settings = self._server_settings()
        if "application_name" not in url_settings(self.dsn):
            settings["application_name"] = APPLICATION_NAME
        return await asyncpg.connect(self.dsn, timeout=CONNECT_TIMEOUT_S, server_settings=settings)

    async def lease(self, name: str) -> Lease:
        return self._leases.keep(AdvisoryLease(self.dsn, self.schema, check_lease_name(name)))

    async def close(self) -> None:
        await self._leases.release_all()
        listeners, self._listeners = self._listeners, set()
        for listener in listeners:
            await listener.stop()
        self._migrated = False
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def ping(self) -> None:
        async with self._reading() as conn:
            await conn.fetch("SELECT 1")

    # hooks -------------------------------------------------------------------
    def _live_pool(self) -> Any:
        if self._pool is None:
            raise StoreError(f"Postgres store {_where(self.dsn)} is not open")
        return self._pool

    def _reading(self) -> AbstractAsyncContextManager[Conn]:
        return self._paged_reading()

    @asynccontextmanager
    async def _paged_reading(self) -> AsyncIterator[PagedConn]:
        async with _connection(self._live_pool()) as raw:
            yield _PgConn(raw)

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[Conn]:
        async with _connection(self._live_pool(), transaction=True) as raw:
            yield _PgConn(raw)

    def _writing_one(self) -> AbstractAsyncContextManager[Conn]:
        # A single statement commits atomically by itself: no BEGIN/COMMIT trips.
        return self._reading()

    @asynccontextmanager
    async def sequencing(self) -> AsyncIterator[SqlSession]:
        async with _connection(self._live_pool()) as raw:
            conn = _PgConn(raw)
            # BEGIN and the lock in one round trip (simple query protocol)
            await conn.execute(f"BEGIN; {SEQUENCE_LOCK}")

            async def end(commit: bool) -> None:
                if raw.is_in_transaction():
                    if commit and session.new_head is not None:
                        # delivered at COMMIT to every process watching the log
                        notify = f"SELECT pg_notify('{self._channel}', '{session.new_head}')"
                        await conn.execute(f"{notify}; COMMIT")
                        self._saw_committed(session.new_head)
                    else:
                        await conn.execute("COMMIT" if commit else "ROLLBACK")

            session = SqlSession(conn, self._q, self._d, end)
            try:
                yield session
            finally:
                await session.close()

    @asynccontextmanager
    async def audit_snapshot(self) -> AsyncIterator[SqlAuditSnapshot]:
        async with _connection(self._live_pool()) as raw:
            conn = _PgConn(raw)
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield SqlAuditSnapshot(conn, self._d)
            finally:
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")
