"""The connection seam the shared SQL code runs on.

Each backend wraps its driver connection in a ``Conn`` that turns every
driver error into ``StoreError``, so shared code never sees driver types.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, Protocol

from stores.sql.rows import Row


class Conn(Protocol):
    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


class PagedConn(Conn, Protocol):
    """A store's read connection, which also reads one statement a page at a time."""

    def fetch_pages(
        self, sql: str, params: Sequence[Any], size: int
    ) -> AsyncGenerator[list[Row], None]:
        """The rows of one read, at most ``size`` at a time from the driver (a
        purge plan reads every op of a DID: one fetch decoded all at once)."""
        ...
