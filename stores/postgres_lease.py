"""The Postgres store's leases (``stores.leases``): a session advisory lock,
keyed by the schema and the lease name, on a connection of the lease's own
(outside the pool, whose connections other work reuses). The server drops
the lock with the connection, so a holder that dies or is cut off frees it;
a holder that finds its connection gone has lost the lease. A lease that
cannot ask the server (it is unreachable) raises ``StoreError``."""

from __future__ import annotations

import contextlib
from typing import Any

import asyncpg

from stores.base import StoreError
from stores.postgres_errors import CONNECTION_ERRORS

LEASE_CLASS = 0x0DF2  # advisory lock class of leases (see stores.postgres)
TIMEOUT_S = 5.0


class AdvisoryLease:
    def __init__(self, dsn: str, schema: str | None, name: str) -> None:
        self._dsn = dsn
        self._key = f"{schema or ''}:{name}"
        self._conn: Any = None
        self._holding = False

    async def held(self) -> bool:
        try:
            conn = self._conn
            if conn is None or conn.is_closed():
                self._holding = False
                conn = self._conn = await asyncpg.connect(self._dsn, timeout=TIMEOUT_S)
            if self._holding:  # the lock lives as long as this session
                await conn.fetchval("SELECT 1", timeout=TIMEOUT_S)
                return True
            self._holding = bool(
                await conn.fetchval(
                    "SELECT pg_try_advisory_lock($1, hashtext($2))",
                    LEASE_CLASS,
                    self._key,
                    timeout=TIMEOUT_S,
                )
            )
        except CONNECTION_ERRORS as exc:
            lost = self._holding
            await self.release()
            if lost:  # with its session: another may hold it now
                return False
            raise StoreError(f"lease {self._key}: cannot reach Postgres: {exc}") from exc
        return self._holding

    async def release(self) -> None:
        conn, self._conn, self._holding = self._conn, None, False
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)  # ends the session, and its lock
