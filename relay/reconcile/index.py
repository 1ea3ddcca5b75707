"""The relay's fingerprint index: every op of the log as a Negentropy item,
kept current with the store.

- ``start`` builds it from the store in the background; ``ready`` waits.
- ``on_sequenced`` (an ingest listener) inserts this process's commits as
  they happen, O(log n) each.
- ``catch_up`` reads the log from the last seq this index has seen, so
  commits by other processes sharing the store (hypercorn workers on one
  Postgres) are in before a round is answered. A log shorter than what
  the index has seen means the store was rebuilt, and a new feed epoch
  that ops may have left it (a purge, by any process): the index is
  rebuilt in both cases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from relay.protocol.negentropy import op_item
from relay.rules.outcomes import SequencedOp

from .tree import FingerprintTree

log = logging.getLogger("dfos_relay.reconcile")

READ_PAGE = 20_000


class SyncItemSource(Protocol):
    async def read_sync_items(self, after_seq: int, limit: int) -> list[tuple[int, int, str]]: ...
    async def log_length(self) -> int: ...
    async def get_feed_epoch(self) -> str: ...


class FingerprintIndex:
    def __init__(self, store: SyncItemSource) -> None:
        self._store = store
        self.tree = FingerprintTree()
        self.seq = 0  # every log entry up to here is in the tree
        self.epoch: str | None = None  # the feed epoch the tree was built in
        self.rebuild_seconds: float | None = None
        self._lock = asyncio.Lock()
        self._build: asyncio.Task[None] | None = None
        self._stale = False  # a rebuild is due (a purge) after the one under way

    def start(self) -> None:
        if self._build is None:
            self._begin_build()

    def _begin_build(self) -> None:
        self._stale = True
        if self._build is None or self._build.done():
            self._build = asyncio.create_task(self._build_while_stale(), name="fingerprint index")

    async def _build_while_stale(self) -> None:
        # purges in a row while a build runs make one more build, not one each
        while self._stale:
            self._stale = False
            await self.rebuild()

    async def stop(self) -> None:
        if self._build is not None:
            self._build.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._build
            self._build = None

    def invalidate(self) -> None:
        """Rebuild from the store (ops were removed from it: a purge). A
        build under way is left to finish (rounds wait on it) and is then
        followed by one more."""
        self._begin_build()

    async def ready(self) -> FingerprintTree:
        """The tree, current with every commit visible in the store now. A
        build that failed (a store error) is started again by the next round
        that needs it, so one failure does not end reconciliation."""
        if self._build is None:
            self.start()
        build = self._build
        assert build is not None
        if build.done() and not build.cancelled() and build.exception() is not None:
            self._begin_build()
            build = self._build
            assert build is not None
        await asyncio.shield(build)
        await self.catch_up()
        return self.tree

    async def rebuild(self) -> None:
        started = time.perf_counter()
        async with self._lock:
            epoch = await self._store.get_feed_epoch()  # read first: a later purge shows
            items: list[tuple[int, bytes]] = []
            seq = 0
            while page := await self._store.read_sync_items(seq, READ_PAGE):
                items.extend(op_item(created, cid) for _, created, cid in page)
                seq = page[-1][0]
            # all three at once: a build that fails leaves the old epoch, so
            # the next round sees the change and builds again
            self.tree, self.seq, self.epoch = FingerprintTree(items), seq, epoch
        self.rebuild_seconds = time.perf_counter() - started
        log.info("fingerprint index: %d ops in %.2fs", self.tree.size(), self.rebuild_seconds)

    async def catch_up(self) -> int:
        """Insert what the log holds past ``seq``; returns how many were read."""
        if await self._store.log_length() < self.seq:
            log.warning("the log is shorter than the index has seen; rebuilding it")
            await self.rebuild()
            return self.tree.size()
        if self.epoch is not None and await self._store.get_feed_epoch() != self.epoch:
            log.info("the feed epoch changed (a purge or a reset); rebuilding the index")
            await self.rebuild()
            return self.tree.size()
        read = 0
        async with self._lock:
            while page := await self._store.read_sync_items(self.seq, READ_PAGE):
                for _, created, cid in page:
                    self.tree.insert(op_item(created, cid))
                self.seq = page[-1][0]
                read += len(page)
        return read

    def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None) -> None:
        # Inserting is idempotent, so an op read again by catch_up costs a
        # lookup; ``seq`` only advances over a contiguous run of the log.
        if self._build is None or not self._build.done() or self._lock.locked():
            return  # the build or a catch-up will read these from the store
        for op in ops:
            self.tree.insert(op_item(op.created_at_ms, op.cid))
            if op.seq == self.seq + 1:
                self.seq = op.seq
