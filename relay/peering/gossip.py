"""Gossip-out (WEB-RELAY.md "Peering": "Gossip fires on new status only").

Each gossip peer has one bounded queue and one worker task, both owned by
the relay (created in ``start``, cancelled in ``stop``). ``offer`` never
blocks ingestion: it enqueues without waiting, and when a peer's queue is
full the op is dropped for that peer (sync-in repairs the gap) and the drop
is logged with the peer URL. Workers push batches of at most 100 through
``PeerClient.submit_operations`` and retry a failed batch with the peer's
backoff, up to a bounded number of attempts.

An op is never offered back to the peer it came from (``source``). Ops a
peer pushed to us via POST /operations arrive without a source and may echo
once; the peer answers ``duplicate`` and does not re-gossip, so it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from peer.base import PeerClient, PeerError

from .backoff import Backoff
from .config import PeeringConfig

log = logging.getLogger("dfos_relay.peering")


class LaneWatcher(Protocol):
    """Hooks for the replication ledger's out-links (``relay.peering.watermark``)."""

    def queued(self, url: str, tokens: Sequence[str]) -> None: ...
    def lost(self, url: str, tokens: Sequence[str]) -> None: ...
    async def before_delivery(self, url: str) -> None: ...
    async def delivered(self, url: str, tokens: Sequence[str]) -> None: ...
    async def failed(self, url: str, error: BaseException) -> None: ...


class GossipLane:
    """The queue and worker for one gossip peer."""

    def __init__(
        self, peer_url: str, client: PeerClient, backoff: Backoff, config: PeeringConfig
    ) -> None:
        self.peer_url = peer_url
        self._client = client
        self._backoff = backoff
        self._config = config
        self._queue: asyncio.Queue[str] = asyncio.Queue(maxsize=config.gossip_queue_max)
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.delivered = 0
        self.watcher: LaneWatcher | None = None  # set by the peering service

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"gossip {self.peer_url}")

    def offer(self, tokens: Iterable[str]) -> None:
        dropped = 0
        queued: list[str] = []
        lost: list[str] = []
        for token in tokens:
            try:
                self._queue.put_nowait(token)
                queued.append(token)
            except asyncio.QueueFull:
                dropped += 1
                lost.append(token)
        if self.watcher is not None:
            self.watcher.queued(self.peer_url, queued)
            if lost:
                self.watcher.lost(self.peer_url, lost)
        if dropped:
            if self.dropped == 0 or self.dropped // 1000 != (self.dropped + dropped) // 1000:
                log.warning(
                    "peer %s: gossip queue full (%d), dropped %d ops so far; sync will repair",
                    self.peer_url,
                    self._config.gossip_queue_max,
                    self.dropped + dropped,
                )
            self.dropped += dropped

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

    async def stop(self, flush_timeout_s: float) -> None:
        """Give the queue a bounded time to drain, then cancel the worker."""
        if self._task is None:
            return
        if not self._task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), flush_timeout_s)
        if self._queue.qsize():
            log.warning("peer %s: shutdown left %d ops ungossiped", self.peer_url, self.backlog)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._config.gossip_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._deliver(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _deliver(self, batch: list[str]) -> None:
        if self.watcher is not None:
            await self.watcher.before_delivery(self.peer_url)  # a paused out-link waits
        for attempt in range(1, self._config.gossip_max_attempts + 1):
            wait = self._backoff.delay(self.peer_url)
            if wait:
                await asyncio.sleep(wait)
            try:
                await self._client.submit_operations(self.peer_url, batch)
            except PeerError as exc:
                self._backoff.failure(self.peer_url, f"gossip (attempt {attempt})", exc)
                if self.watcher is not None:
                    await self.watcher.failed(self.peer_url, exc)
                continue
            self._backoff.success(self.peer_url)
            self.delivered += len(batch)
            if self.watcher is not None:
                await self.watcher.delivered(self.peer_url, batch)
            return
        if self.watcher is not None:
            self.watcher.lost(self.peer_url, batch)
        log.error(
            "peer %s: gossip gave up on %d ops after %d attempts; sync will repair",
            self.peer_url,
            len(batch),
            self._config.gossip_max_attempts,
        )


class Gossip:
    """Gossip lanes for every gossip peer."""

    def __init__(
        self, peer_urls: Iterable[str], client: PeerClient, backoff: Backoff, config: PeeringConfig
    ) -> None:
        self._config = config
        self.lanes = {url: GossipLane(url, client, backoff, config) for url in peer_urls}

    def start(self) -> None:
        for lane in self.lanes.values():
            lane.start()

    def offer(self, tokens: list[str], source: str | None) -> None:
        for url, lane in self.lanes.items():
            if url != source:
                lane.offer(tokens)

    async def stop(self) -> None:
        await asyncio.gather(
            *(lane.stop(self._config.gossip_flush_timeout_s) for lane in self.lanes.values())
        )

    async def flushed(self) -> None:
        """Wait until every lane's queue is empty (tests, benchmarks)."""
        await asyncio.gather(*(lane._queue.join() for lane in self.lanes.values()))
