"""The connection seam the shared SQL code runs on.

Each backend wraps its driver connection in a ``Conn`` that turns every
driver error into ``StoreError``, so shared code never sees driver types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from stores.sql.rows import Row


class Conn(Protocol):
    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...
