"""Gossip-out (WEB-RELAY.md "Peering": "Gossip fires on new status only").

Each gossip peer has one bounded queue and one worker task, both owned by
the relay (created in ``start``, cancelled in ``stop``). ``offer`` never
blocks ingestion: it enqueues without waiting, and when a peer's queue is
full the op is dropped for that peer (sync-in repairs the gap) and the drop
is logged with the peer URL. Workers push batches of at most 100 through
``PeerClient.submit_operations`` and retry a failed batch with the peer's
backoff, up to a bounded number of attempts.

An op is never offered back to the peer it came from (``source``), and a
lane drops, when it sends a batch, every op ``skip`` says its peer sent us
by any path (``Peering.sent_us``, over ``relay.peering.echo``). Every push
names this relay in ``RELAY_SENDER_HEADER`` and proves it in
``RELAY_SENDER_PROOF_HEADER`` (so the receiver resolves it to a peer, not a
client; asked for per attempt, as a proof can expire during retries) and
carries the item's fan-out hop in ``FANOUT_HOP_HEADER``; a batch mixing hops
goes out as one POST per hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from peer.base import FANOUT_HOP_HEADER, PeerClient, PeerError

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


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One op queued for one peer; ``hop`` is the fan-out hop header value
    (``None``: a plain push, as a v0.7.1 relay gossips)."""

    cid: str
    jws_token: str
    hop: str | None = None


# The headers every push to a peer URL carries (the sender's DID once it is
# known, its proof once the peer's DID is known).
PushHeaders = Callable[[str], Mapping[str, str]]


# (peer URL, op CID) -> True when the op is not to be pushed to that peer.
Skip = Callable[[str, str], bool]


# Awaited before each batch is filtered and sent (learn the peer's DID).
Prepare = Callable[[str], Awaitable[None]]


def _no_headers(peer_url: str) -> Mapping[str, str]:
    return {}


async def _prepare_nothing(peer_url: str) -> None:
    return None


def _skip_nothing(peer_url: str, cid: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class PushHooks:
    """What the peering service lends every lane: echo suppression
    (``skip``), the push headers, and the step before each batch."""

    skip: Skip = _skip_nothing
    headers: PushHeaders = _no_headers
    prepare: Prepare = _prepare_nothing


class GossipLane:
    """The queue and worker for one gossip peer."""

    def __init__(
        self,
        peer_url: str,
        client: PeerClient,
        backoff: Backoff,
        config: PeeringConfig,
        hooks: PushHooks = PushHooks(),
    ) -> None:
        self.peer_url = peer_url
        self._client = client
        self._backoff = backoff
        self._config = config
        self._skip = hooks.skip
        self._headers = hooks.headers
        self._prepare = hooks.prepare
        self._queue: asyncio.Queue[Outgoing] = asyncio.Queue(maxsize=config.gossip_queue_max)
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.delivered = 0
        self.watcher: LaneWatcher | None = None  # set by the peering service
        self.echoes_suppressed = 0  # ops not sent because the peer sent them to us

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"gossip {self.peer_url}")

    def offer(self, items: Iterable[Outgoing]) -> None:
        dropped = 0
        queued: list[str] = []
        lost: list[str] = []
        for item in items:
            try:
                self._queue.put_nowait(item)
                queued.append(item.jws_token)
            except asyncio.QueueFull:
                dropped += 1
                lost.append(item.jws_token)
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

    async def _deliver(self, queued: list[Outgoing]) -> None:
        if self.watcher is not None:
            await self.watcher.before_delivery(self.peer_url)  # a paused out-link waits
        await self._prepare(self.peer_url)
        batch = [item for item in queued if not self._skip(self.peer_url, item.cid)]
        self.echoes_suppressed += len(queued) - len(batch)
        if self.watcher is not None and len(batch) < len(queued):
            # deliberately not pushed (the peer sent them to us): past the watermark too
            kept = {id(item) for item in batch}
            skipped = [item.jws_token for item in queued if id(item) not in kept]
            await self.watcher.delivered(self.peer_url, skipped)
        hops = dict.fromkeys(item.hop for item in batch)
        for hop in hops:
            await self._deliver_hop([i.jws_token for i in batch if i.hop == hop], hop)

    async def _deliver_hop(self, batch: list[str], hop: str | None) -> None:
        for attempt in range(1, self._config.gossip_max_attempts + 1):
            wait = self._backoff.delay(self.peer_url)
            if wait:
                await asyncio.sleep(wait)
            if attempt > 1:  # a peer that was down: its DID (our proof's audience) now
                await self._prepare(self.peer_url)
            # per attempt: retries can outlast a sender proof
            headers = dict(self._headers(self.peer_url))
            if hop is not None:
                headers[FANOUT_HOP_HEADER] = hop
            try:
                await self._client.submit_operations(self.peer_url, batch, headers)
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
    """Gossip lanes for every gossip peer (configured, or learned by discovery)."""

    def __init__(
        self,
        peer_urls: Iterable[str],
        client: PeerClient,
        backoff: Backoff,
        config: PeeringConfig,
        hooks: PushHooks = PushHooks(),
    ) -> None:
        self._config = config
        self._client = client
        self._backoff = backoff
        self._hooks = hooks
        self._started = False
        self.lanes: dict[str, GossipLane] = {}
        for url in peer_urls:
            self.add_lane(url)

    def add_lane(self, url: str) -> GossipLane:
        """A lane for ``url`` (started at once if gossip is running)."""
        lane = self.lanes.get(url)
        if lane is None:
            lane = GossipLane(
                url,
                self._client,
                self._backoff,
                self._config,
                self._hooks,
            )
            self.lanes[url] = lane
            if self._started:
                lane.start()
        return lane

    def start(self) -> None:
        self._started = True
        for lane in self.lanes.values():
            lane.start()

    def offer(self, items: list[Outgoing], source: str | None) -> None:
        """Every lane but ``source``'s (flooding, as a v0.7.1 relay gossips)."""
        for url, lane in self.lanes.items():
            if url != source:
                lane.offer(items)

    def healthy(self, url: str) -> bool:
        """``url`` has not failed since its last success (fan-out picks
        stand-ins for coordinators that have)."""
        return self._backoff.failures(url) == 0

    def send(self, url: str, items: list[Outgoing]) -> None:
        """``url``'s lane only (rendezvous routing); no lane, nothing sent."""
        lane = self.lanes.get(url)
        if lane is not None and items:
            lane.offer(items)

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(
            *(lane.stop(self._config.gossip_flush_timeout_s) for lane in self.lanes.values())
        )

    async def flushed(self) -> None:
        """Wait until every lane's queue is empty (tests, benchmarks)."""
        await asyncio.gather(*(lane._queue.join() for lane in self.lanes.values()))
