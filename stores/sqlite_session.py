"""The SQLite sequencing session: one hop to the connection's thread per step.

aiosqlite runs every call on the connection's own thread; each call costs a
queue hand-off and a wake-up of the event loop (tens of microseconds), more
than most of the small indexed reads a session makes. So a session here
runs whole steps on that thread in one hop:

- a round's ``read_state`` (every collection, links followed), with the
  ``BEGIN IMMEDIATE`` of the session folded into its first hop;
- the commit: ``write_batch`` (positions read under the write lock) and
  ``COMMIT`` together.

The session's reads run right on the event loop's thread instead, once the
transaction holds the write lock: a read inside it never waits for a lock
and takes a fraction of a millisecond, where a hop costs two thread
wake-ups (a millisecond or more each on a busy host, run queues longer than
the cores). ``BEGIN IMMEDIATE`` is tried there too without waiting; if
another process holds the write lock, it is taken in a hop that waits. The
commit keeps its hop.

The shared SQL code is reused as is: on the connection's thread it runs over
a ``DirectConn`` whose awaits never suspend, so its coroutines are driven to
completion right there (``drive``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from stores.base import CommitBatch, StateQuery, StateRows, StoreError
from stores.sql.dialect import Dialect
from stores.sql.queries import Queries
from stores.sql.rows import Row
from stores.sql.session import SqlSession, TransactionEnd, write_batch

_T = TypeVar("_T")


class DirectConn:
    """``Conn`` straight on a sqlite3 connection: only for its own thread."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self.db.execute(sql, params).fetchall()

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.db.execute(sql, params)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.db.executemany(sql, rows)


def drive(coro: Coroutine[Any, Any, _T]) -> _T:
    """The result of a coroutine that never suspends, run on this thread."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a direct SQLite step suspended")


async def _not_used(commit: bool) -> None:
    raise AssertionError("direct sessions never end a transaction")


def read_state_direct(
    db: sqlite3.Connection, q: Queries, d: Dialect, query: StateQuery, begin: bool
) -> StateRows:
    if begin:
        db.execute("BEGIN IMMEDIATE")
    return drive(SqlSession(DirectConn(db), q, d, _not_used).read_state(query))


def commit_direct(
    db: sqlite3.Connection, q: Queries, d: Dialect, batch: CommitBatch, begin: bool
) -> int:
    """Write ``batch`` and COMMIT; on any error roll back, then raise."""
    try:
        if begin:
            db.execute("BEGIN IMMEDIATE")
        head = drive(write_batch(DirectConn(db), q, d, batch))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return head


# How long a connection waits for another process's lock (set on every
# connection by ``stores.sqlite``; ``begin_now`` puts it back).
BUSY_TIMEOUT_MS = 30_000


def begin_now(db: sqlite3.Connection) -> bool:
    """BEGIN IMMEDIATE unless another connection holds the write lock (False);
    never waits."""
    db.execute("PRAGMA busy_timeout = 0")
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
            return False
        raise
    finally:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return True


def _fetch(db: sqlite3.Connection, sql: str, params: Sequence[Any], begin: bool) -> list[Row]:
    if begin:
        db.execute("BEGIN IMMEDIATE")
    return db.execute(sql, params).fetchall()


def _executemany(
    db: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]], begin: bool
) -> None:
    if begin:
        db.execute("BEGIN IMMEDIATE")
    db.executemany(sql, rows)


class Hopper(Protocol):
    async def hop(self, fn: Any, *args: Any) -> Any:
        """``fn(db, *args)`` on the connection's thread; errors as StoreError."""
        ...

    def run_here(self, fn: Any, *args: Any) -> Any:
        """``fn(db, *args)`` on the calling thread (the connection's own thread
        is idle); errors as StoreError."""
        ...


class _SessionConn:
    """The session's ``Conn``: statements in the transaction begun by the first."""

    def __init__(self, conn: Hopper, session: SqliteSession) -> None:
        self._conn = conn
        self._session = session

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        if self._session.begun_here():  # the write lock is held: a read never waits
            rows: list[Row] = self._conn.run_here(_fetch, sql, params, False)
            return rows
        rows = await self._conn.hop(_fetch, sql, params, self._session.begin())
        return rows

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        # writes (an admin's moderation batch) keep their hop, however large
        await self._conn.hop(_fetch, sql, params, self._session.begin())

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        # the sequencing commit writes in one hop (commit_direct); this serves
        # the rarer writes of a session, such as an admin's moderation batch
        await self._conn.hop(_executemany, sql, rows, self._session.begin())


class SqliteSession(SqlSession):
    """``SqlSession`` whose reads run on the caller's thread (the first one
    takes a hop if it must wait for the write lock) and whose commit takes
    one thread hop.

    The transaction (BEGIN IMMEDIATE) begins with the first hop; ``end``
    only ever rolls back (the commit hop commits by itself)."""

    def __init__(self, conn: Hopper, q: Queries, d: Dialect, end: TransactionEnd) -> None:
        super().__init__(_SessionConn(conn, self), q, d, end)
        self._hopper = conn
        self._begun = False

    def begin(self) -> bool:
        """True the first time: that hop must BEGIN."""
        first, self._begun = not self._begun, True
        return first

    def begun_here(self) -> bool:
        """True once the transaction is open; opens it on this thread if that
        needs no wait (False: another process holds the write lock)."""
        if not self._begun and self._hopper.run_here(begin_now):
            self._begun = True
        return self._begun

    async def hold_lock(self) -> None:
        """Open the transaction now (BEGIN IMMEDIATE), waiting for another
        process that holds the write lock: from here on no one else commits."""
        if not self.begun_here():
            await self._hopper.hop(_fetch, "SELECT 1", (), self.begin())

    async def read_state(self, query: StateQuery) -> StateRows:
        if self.begun_here():  # the write lock is held: a read never waits
            here: StateRows = self._hopper.run_here(
                read_state_direct, self._q, self._d, query, False
            )
            return here
        rows: StateRows = await self._hopper.hop(
            read_state_direct, self._q, self._d, query, self.begin()
        )
        return rows

    async def commit(self, batch: CommitBatch) -> int:
        if self.done:
            raise StoreError("sequencing session already committed")
        self.done = True
        head: int = await self._hopper.hop(commit_direct, self._q, self._d, batch, self.begin())
        self.new_head = head if batch.operations else None
        return head
