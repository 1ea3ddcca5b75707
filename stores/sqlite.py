"""SQLite store on aiosqlite: the default store of a standalone relay.

One database file in WAL mode with ``synchronous=NORMAL`` (a commit survives a
process crash; an OS crash may lose the last commits but never corrupts).

- one *writer* connection, guarded by an asyncio lock: sequencing sessions
  run ``BEGIN IMMEDIATE`` ... ``COMMIT`` on it (the IMMEDIATE write lock also
  serializes against other processes on the same file), and so do the small
  writes (raw buffer, blobs, cursors, identity), each in its own transaction;
- a few *reader* connections for the proof reader, which in WAL mode see the
  last committed state and never block the writer;
- one more reader used right on the event loop's thread, for the read every
  ingestion request makes before its session (``sequenced_and_keys``): it
  takes a fraction of a millisecond, where a hop to a reader thread costs two
  thread wake-ups (a millisecond or more each on a busy host). It never waits
  (no busy timeout): if the file is busy for a moment, the read takes a hop;
- for ``verify-store``, a connection of its own holding one read transaction
  (a WAL snapshot): it sees one commit throughout and blocks no writer;
- for readiness (``ping``), a new read-only connection per probe, since the
  others' page caches hide a file damaged under them (``sqlite_probe``).

Every ingestion batch is one transaction: a failing statement rolls the
whole batch back. Schema creation/migration runs on ``open()``; every startup
problem (missing or read-only directory, read-only or corrupt file, newer
schema) is a ``StoreError`` naming the file.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from stores.base import IdentityKeyRecord, StoreError
from stores.epoch import new_epoch
from stores.leases import HandedOut, Lease, check_lease_name
from stores.sql import rows as R
from stores.sql.audit import SqlAuditSnapshot
from stores.sql.conn import Conn, PagedConn
from stores.sql.dialect import SQLITE
from stores.sql.queries import Queries
from stores.sql.rows import Row
from stores.sql.schema import READ_VERSION, VERSION_TABLE, pending_migrations
from stores.sql.store import SqlStore
from stores.sqlite_checkpoint import CHECKPOINTER_CACHE_PRAGMA, WRITER_PRAGMA, Checkpointer
from stores.sqlite_lease import FileLease, lease_path
from stores.sqlite_open_mark import OpenMark
from stores.sqlite_probe import probe_file
from stores.sqlite_session import BUSY_TIMEOUT_MS, SqliteSession

log = logging.getLogger("dfos_relay")

READERS = 2
CACHE_KIB = 64 * 1024
# the inline reader never waits on the event loop's thread (see the module doc)
INLINE_BUSY_TIMEOUT = "PRAGMA busy_timeout = 0"
PRAGMAS = (
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA synchronous = NORMAL",
    f"PRAGMA cache_size = -{CACHE_KIB}",
    "PRAGMA temp_store = MEMORY",
)


def _describe(path: Path, exc: sqlite3.Error) -> StoreError:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return StoreError(f"SQLite file {path} is not a database or is corrupt: {text}")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"SQLite file {path} is read-only: {text}")
    if "unable to open" in text:
        return StoreError(f"cannot open SQLite file {path}: {text}")
    return StoreError(f"SQLite error on {path}: {text}")


class _SqliteConn:
    """``Conn`` over one aiosqlite connection; driver errors become StoreError.

    Inside a write transaction (``begin``) writes are *deferred* and run with
    the COMMIT in a single hop to the connection's thread (``end``): a batch
    costs one thread round trip however many tables it touches. Reads run at
    once (the session's reads all precede its writes).
    """

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self.db = db
        self._path = path
        self._deferred: list[tuple[str, Sequence[Any], bool]] | None = None

    async def _hop(self, fn: Any, *args: Any) -> Any:
        try:
            return await self.db._execute(fn, *args)
        except sqlite3.Error as exc:
            raise _describe(self._path, exc) from exc

    async def hop(self, fn: Any, *args: Any) -> Any:
        """``fn(db, *args)`` on the connection's thread, in one hand-off."""
        return await self._hop(fn, self.db._conn, *args)

    def run_here(self, fn: Any, *args: Any) -> Any:
        """``fn(db, *args)`` on the calling thread: only while the connection's
        own thread is idle (a sequencing session holds the store's lock)."""
        try:
            return fn(self.db._conn, *args)
        except sqlite3.Error as exc:
            raise _describe(self._path, exc) from exc

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return list(await self._hop(_fetchall, self.db._conn, sql, params))

    async def fetch_pages(
        self, sql: str, params: Sequence[Any], size: int
    ) -> AsyncGenerator[list[Row], None]:
        # one statement stepped a page per hop: other reads on this
        # connection run between pages, on cursors of their own
        cursor = await self._hop(_cursor, self.db._conn, sql, params)
        try:
            while True:
                rows = await self._hop(cursor.fetchmany, size)
                if rows:
                    yield rows
                if len(rows) < size:
                    return
        finally:
            await self._hop(cursor.close)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        if self._deferred is not None:
            self._deferred.append((sql, params, False))
        else:
            await self._hop(_fetchall, self.db._conn, sql, params)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if self._deferred is not None:
            self._deferred.append((sql, rows, True))
        else:
            await self._hop(self.db._conn.executemany, sql, rows)

    async def begin(self) -> None:
        await self.execute("BEGIN IMMEDIATE")
        self._deferred = []

    async def end(self, commit: bool) -> None:
        """COMMIT the deferred writes in one hop, or ROLLBACK everything.
        A failing COMMIT rolls back before raising, whatever failed (a value
        sqlite3 cannot bind raises no sqlite3 error, and an open transaction
        would refuse every later write)."""
        steps, self._deferred = self._deferred or [], None
        if not commit:
            await self._hop(_rollback, self.db._conn)
            return
        steps.append(("COMMIT", (), False))
        try:
            await self._hop(_run_steps, self.db._conn, steps)
        except BaseException:
            await self._hop(_rollback, self.db._conn)
            raise


def _fetchall(db: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    return db.execute(sql, params).fetchall()


def _cursor(db: sqlite3.Connection, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
    return db.execute(sql, params)


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        db.execute("ROLLBACK")


def _run_steps(db: sqlite3.Connection, steps: list[tuple[str, Sequence[Any], bool]]) -> None:
    for sql, params, many in steps:
        if many:
            db.executemany(sql, params)
        else:
            db.execute(sql, params)


def _sequenced_and_keys(
    db: sqlite3.Connection,
    q: Queries,
    lst: Callable[[Iterable[str]], Any],
    cids: Collection[str],
    dids: Collection[str],
) -> tuple[set[str], dict[str, list[IdentityKeyRecord]]]:
    sequenced = {str(r[0]) for r in db.execute(q.known_cids, (lst(cids),))} if cids else set()
    keys = R.keys_by_did(db.execute(q.get_keys, (lst(dids),))) if dids else {}
    return sequenced, keys


def _check_writable(path: Path) -> None:
    """Refuse read-only files/directories up front (also as root, by mode bits)."""
    parent = path.parent
    if not parent.is_dir():
        raise StoreError(f"SQLite directory {parent} does not exist")
    if path.exists():
        if not path.is_file():
            raise StoreError(f"SQLite path {path} is not a regular file")
        if not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222:
            raise StoreError(f"SQLite file {path} is read-only")
    if not os.access(parent, os.W_OK) or not parent.stat().st_mode & 0o222:
        raise StoreError(
            f"SQLite directory {parent} is read-only (the relay needs it for {path.name} "
            "and its WAL files)"
        )


class SqliteStore(SqlStore):
    """A ``RelayStore`` in one SQLite file."""

    def __init__(self, path: str | os.PathLike[str], readers: int = READERS) -> None:
        super().__init__(SQLITE)
        self.path = Path(path)
        self._n_readers = readers
        self._writer: _SqliteConn | None = None
        self._readers: list[_SqliteConn] = []
        self._rr = itertools.count()
        self._lock = asyncio.Lock()
        self._checkpoints: _SqliteConn | None = None
        self._checkpointer: Checkpointer | None = None
        self._inline: sqlite3.Connection | None = None
        self._leases = HandedOut()
        self._mark: OpenMark | None = None

    # lifecycle -------------------------------------------------------------
    async def open(self) -> None:
        if self._writer is not None:
            return
        _check_writable(self.path)
        try:
            self._writer = await self._connect(shared=True)
            mode = await self._writer.fetch("PRAGMA journal_mode = WAL")
            if not mode or str(mode[0][0]).lower() != "wal":
                raise StoreError(f"SQLite file {self.path}: cannot enable WAL mode ({mode})")
            await self._writer.execute(WRITER_PRAGMA)
            await self._migrate(self._writer)
            await self._take_open_mark()
            self._checkpoints = await self._connect()
            # copies WAL frames to the file: no use for a large page cache
            await self._checkpoints.execute(CHECKPOINTER_CACHE_PRAGMA)
            self._checkpointer = Checkpointer(self._checkpoints)
            for _ in range(self._n_readers):
                reader = await self._connect()
                await reader.execute("PRAGMA query_only = ON")
                self._readers.append(reader)
            self._inline = self._connect_inline()
        except BaseException:
            await self.close()
            raise

    async def _take_open_mark(self) -> None:
        """A store that was open when the machine went down may have lost its
        last commits (``synchronous=NORMAL``), whose seqs will be given again:
        the changes feed starts a new epoch, so that its consumers are told."""
        self._mark = OpenMark(self.path)
        if await asyncio.to_thread(self._mark.take):
            assert self._writer is not None
            if await self._writer.fetch(self._q.get_epoch):
                epoch = new_epoch()
                await self._writer.execute(self._q.set_epoch, (epoch,))
                log.warning(
                    "SQLite file %s was open when the machine went down: its last commits "
                    "may be lost, so the changes feed starts epoch %s",
                    self.path,
                    epoch,
                )
        await asyncio.to_thread(self._mark.record_open)

    async def _connect(self, shared: bool = False) -> _SqliteConn:
        """``shared``: the writer, on which a sequencing session also reads from
        the event loop's thread (never while the connection's thread runs)."""
        try:
            db = await aiosqlite.connect(
                self.path, isolation_level=None, check_same_thread=not shared
            )
        except sqlite3.Error as exc:
            raise _describe(self.path, exc) from exc
        conn = _SqliteConn(db, self.path)
        try:
            for pragma in PRAGMAS:
                await conn.execute(pragma)
        except BaseException:
            await db.close()
            raise
        return conn

    def _connect_inline(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise _describe(self.path, exc) from exc
        try:
            for pragma in (*PRAGMAS, INLINE_BUSY_TIMEOUT, "PRAGMA query_only = ON"):
                db.execute(pragma)
        except sqlite3.Error as exc:
            db.close()
            raise _describe(self.path, exc) from exc
        return db

    async def _migrate(self, conn: _SqliteConn) -> None:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            await conn.execute(VERSION_TABLE)
            current = (await conn.fetch(READ_VERSION))[0][0]
            for step in pending_migrations(current, SQLITE, f"SQLite file {self.path}"):
                for stmt in step:
                    await conn.execute(stmt)
            await conn.execute("COMMIT")
        except BaseException:
            await conn._hop(_rollback, conn.db._conn)
            raise

    async def lease(self, name: str) -> Lease:
        return self._leases.keep(FileLease(lease_path(self.path, check_lease_name(name))))

    async def close(self) -> None:
        await self._leases.release_all()
        mark, self._mark = self._mark, None
        if self._checkpointer is not None:
            await self._checkpointer.close()
        conns = [c for c in (self._writer, self._checkpoints, *self._readers) if c is not None]
        self._writer, self._readers, self._checkpoints = None, [], None
        self._checkpointer = None
        inline, self._inline = self._inline, None
        try:
            if inline is not None:
                inline.close()
            for conn in conns:
                await conn.db.close()
        finally:
            if mark is not None:  # after the connections: the last one checkpoints
                await asyncio.to_thread(mark.release)

    async def ping(self) -> None:
        async with self._reading() as conn:
            await conn.fetch("SELECT 1")
        # the open connections' caches hide a file damaged since: read it anew
        await asyncio.to_thread(probe_file, self.path, READ_VERSION)

    async def sequenced_and_keys(
        self, cids: Collection[str], dids: Collection[str]
    ) -> tuple[set[str], dict[str, list[IdentityKeyRecord]]]:
        inline = self._inline
        if inline is not None:
            try:
                return _sequenced_and_keys(inline, self._q, self._d.lst, cids, dids)
            except sqlite3.Error:
                pass  # busy for a moment, say: the reader threads wait it out
        return await super().sequenced_and_keys(cids, dids)

    # hooks -------------------------------------------------------------------
    def _live_writer(self) -> _SqliteConn:
        if self._writer is None:
            raise StoreError(f"SQLite store {self.path} is not open")
        return self._writer

    def _reading(self) -> AbstractAsyncContextManager[Conn]:
        return self._paged_reading()

    @asynccontextmanager
    async def _paged_reading(self) -> AsyncIterator[PagedConn]:
        if not self._readers:
            raise StoreError(f"SQLite store {self.path} is not open")
        yield self._readers[next(self._rr) % len(self._readers)]

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[Conn]:
        writer = self._live_writer()
        async with self._lock:
            await writer.begin()
            try:
                yield writer
            except BaseException:
                await writer.end(False)
                raise
            await writer.end(True)

    @asynccontextmanager
    async def sequencing(self) -> AsyncIterator[SqliteSession]:
        writer = self._live_writer()
        async with self._lock:
            session = SqliteSession(writer, self._q, self._d, writer.end)
            try:
                yield session
            finally:
                await session.close()
        if session.new_head is not None and self._checkpointer is not None:
            self._checkpointer.committed()

    @asynccontextmanager
    async def moderating(self) -> AsyncIterator[SqliteSession]:
        # A purge plan is read (through the readers) before the session writes:
        # the write lock is taken first, so no other process sharing the file
        # commits between the plan and its write.
        async with self.sequencing() as session:
            await session.hold_lock()
            yield session

    @asynccontextmanager
    async def audit_snapshot(self) -> AsyncIterator[SqlAuditSnapshot]:
        self._live_writer()  # the store is open (and migrated)
        conn = await self._connect()
        try:
            await conn.execute("PRAGMA query_only = ON")
            await conn.execute("BEGIN")  # deferred: the snapshot starts at the first read
            yield SqlAuditSnapshot(conn, self._d)
        finally:
            await conn._hop(_rollback, conn.db._conn)
            await conn.db.close()
