"""The test schemas' drops, off the tests' path: a thread of its own drops the
schemas given to it, on one connection it keeps, while the next tests run.

A ``DROP SCHEMA ... CASCADE`` of a store's ~20 tables, with their indexes,
sequences and triggers (~10 ms of server CPU), and the new connection it
took, were ~30 ms of every Postgres test's teardown; the server does it here
while the next test runs (on a core the test leaves idle: where every core is
busy it competes with the next test's own work, as the server's work is not
lower). Schemas queued together are dropped in one statement (one commit).

``wait`` (at the session's end) returns once every schema given is dropped,
or after its timeout with the names still there: the server is left as
tidy as the inline drop left it. A drop that fails (the server gone, a lock
not granted in ``LOCK_TIMEOUT``: a test left a transaction open on the
schema) is retried every ``RETRY_S``, each schema alone: a failed one does
not hold back the others. Not covered: a process killed before ``wait``
leaves the schemas still queued (as an inline drop left its test's one).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import asyncpg

from stores.postgres import quoted_schema

LOCK_TIMEOUT = "5s"  # a schema some connection still holds a lock in: retried later
RETRY_S = 1.0
# schemas per statement: each drop locks its ~60 objects in the server's lock
# table, which every session on the server shares
BATCH_MAX = 8
VACUUM_EVERY = 100  # schemas dropped between two vacuums of the catalogs
CATALOGS = (
    "pg_attribute", "pg_class", "pg_depend", "pg_type", "pg_index", "pg_constraint",
    "pg_attrdef", "pg_trigger", "pg_sequence", "pg_namespace", "pg_statistic",
)  # fmt: skip


class SchemaDropper:
    def __init__(self, url: str) -> None:
        self._url = url
        self._cond = threading.Condition()
        self._queued: list[str] = []  # given, not taken by a drop yet
        self._pending: set[str] = set()  # given, not dropped yet
        self._thread: threading.Thread | None = None

    def drop_later(self, schema: str) -> None:
        with self._cond:
            self._queued.append(schema)
            self._pending.add(schema)
            if self._thread is None:
                # a daemon: a session that never calls wait still exits
                self._thread = threading.Thread(
                    target=self._run, name="schema-dropper", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> set[str]:
        """Block until every schema given is dropped; the ones still there."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            return set(self._pending)

    def _run(self) -> None:
        with asyncio.Runner() as runner:
            conn: Any = runner.run(self._vacuum(None))
            since_vacuum = 0
            while True:
                with self._cond:
                    while not self._queued:
                        self._cond.wait()
                    batch, self._queued = self._queued[:BATCH_MAX], self._queued[BATCH_MAX:]
                conn, failed = runner.run(self._drop(conn, batch))
                with self._cond:
                    self._pending.difference_update(set(batch) - set(failed))
                    self._cond.notify_all()
                since_vacuum += len(batch) - len(failed)
                if since_vacuum >= VACUUM_EVERY:
                    conn, since_vacuum = runner.run(self._vacuum(conn)), 0
                if failed:
                    time.sleep(RETRY_S)
                    with self._cond:
                        self._queued.extend(failed)

    async def _vacuum(self, conn: Any) -> Any:
        """Vacuum the catalogs the stores' DDL writes: the connection to keep."""
        tables = ", ".join(f"pg_catalog.{name}" for name in CATALOGS)
        try:
            if conn is None or conn.is_closed():
                conn = await asyncpg.connect(
                    self._url, server_settings={"lock_timeout": LOCK_TIMEOUT}
                )
            await conn.execute(f"VACUUM {tables}")
        except Exception:  # tidying only: the drops go on without it
            if conn is not None and conn.is_closed():
                conn = None
        return conn

    async def _drop(self, conn: Any, batch: list[str]) -> tuple[Any, list[str]]:
        """Drop ``batch`` in one statement, else each schema alone: the
        connection to keep (None: lost) and the schemas not dropped."""
        if len(batch) > 1:
            conn, dropped = await self._drop_group(conn, batch)
            if dropped:
                return conn, []
        failed = []
        for name in batch:
            conn, dropped = await self._drop_group(conn, [name])
            if not dropped:
                failed.append(name)
        return conn, failed

    async def _drop_group(self, conn: Any, group: list[str]) -> tuple[Any, bool]:
        try:
            if conn is None or conn.is_closed():
                conn = await asyncpg.connect(
                    self._url, server_settings={"lock_timeout": LOCK_TIMEOUT}
                )
            names = ", ".join(quoted_schema(name) for name in group)
            await conn.execute(f"DROP SCHEMA IF EXISTS {names} CASCADE")
        except Exception:  # whatever it is, the thread goes on: retried
            if conn is not None and conn.is_closed():
                conn = None
            return conn, False
        return conn, True
