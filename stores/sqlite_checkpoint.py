"""Background WAL checkpoints for the SQLite store.

In WAL mode every commit appends the pages it changed to the WAL; a
*checkpoint* copies them back into the database file and syncs it. SQLite
runs one inside the COMMIT of whichever write crosses ``wal_autocheckpoint``
pages, so every few ingestion batches one of them pays for copying and
syncing megabytes, on the sequencing path.

Here the writer's automatic threshold is only a backstop (``BACKSTOP_PAGES``),
and a dedicated connection (its own thread) runs a PASSIVE checkpoint after
every few committed sessions, beside the writer: PASSIVE never blocks the
writer or the readers, it copies what no reader still needs. Checkpoints are
an optimisation of the file layout only; a failed one changes nothing and
the next one (or the backstop) catches up.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from stores.base import StoreError

# Commits between background checkpoints (a batch of 100 ops changes a few
# hundred pages), and the writer's own threshold if those fall behind.
CHECKPOINT_EVERY_COMMITS = 8
BACKSTOP_PAGES = 16_384  # 64 MiB of 4 KiB pages
WRITER_PRAGMA = f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}"
CHECKPOINTER_CACHE_PRAGMA = "PRAGMA cache_size = -2048"  # KiB

log = logging.getLogger("dfos_relay")


class _Fetching(Protocol):
    async def fetch(self, sql: str) -> object: ...


class Checkpointer:
    """Starts a PASSIVE checkpoint every ``every`` commits, one at a time."""

    def __init__(self, conn: _Fetching, every: int = CHECKPOINT_EVERY_COMMITS) -> None:
        self._conn = conn
        self._every = every
        self._commits = 0
        self._task: asyncio.Task[None] | None = None

    def committed(self) -> None:
        self._commits += 1
        if self._commits < self._every or (self._task is not None and not self._task.done()):
            return
        self._commits = 0
        self._task = asyncio.create_task(self._checkpoint())

    async def _checkpoint(self) -> None:
        try:
            await self._conn.fetch("PRAGMA wal_checkpoint(PASSIVE)")
        except StoreError as exc:  # the file stays consistent; the next one retries
            log.warning("background WAL checkpoint failed: %s", exc)

    async def close(self) -> None:
        """Wait for a checkpoint under way (the connection closes next)."""
        task, self._task = self._task, None
        if task is not None:
            await task
