"""Recent log entries shared by every subscription, each encoded once.

Live subscribers mostly sit at the same position, the head, so one commit
wakes them all to read the same new entries. This cache makes that one
store read per commit (concurrent reads of a range share one store read)
and one encoding per entry per transport, however many subscribers follow:
an ``Event`` carries its JSON and each transport's framing, computed by
the first subscriber that needs them.

Invariants: entries are immutable once sequenced, so a cached entry never
goes stale within an epoch; the cache is emptied when the epoch changes
(the seq domain was reset). It is bounded in entries and bytes and keeps
only entries near the head: a subscriber catching up from far behind reads
the store directly and evicts nothing. Nothing here is per subscriber.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from relay.feed.messages import Event
from stores.base import FeedStore

PREFETCH_PAGE = 500
MAX_RUNS = 8  # recent runs read and chunked: the last few commits' batches
MAX_ENTRIES = 2048  # about 20 commits of 100 ops: what live subscribers re-read
MAX_BYTES = 16 * 1024 * 1024


class Chunk(NamedTuple):
    data: bytes  # framed events, joined
    last: Event
    events: int  # how many


class EventCache:
    def __init__(
        self, store: FeedStore, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES
    ) -> None:
        self._store = store
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._epoch: str | None = None
        self._events: dict[int, Event] = {}  # seq -> event, in insertion (~seq) order
        self._bytes = 0
        self._high = 0  # the highest seq kept
        self._reads: dict[tuple[int, int], asyncio.Future[list[Event]]] = {}
        self._runs: dict[tuple[int, int], list[Event]] = {}  # recent reads, shared
        self._chunked: dict[tuple[str, int, int], list[Chunk]] = {}

    async def read(self, epoch: str, after: int, upto: int, limit: int) -> list[Event]:
        """Events with ``after < seq <= upto`` in seq order, at most ``limit``;
        fewer (but at least one, if any exist) when only part is cached."""
        if epoch != self._epoch:
            self._clear(epoch)
        end = min(upto, after + limit)
        cached = self._cached(after, end)
        if cached:
            return cached
        pending = next(
            (kf for kf in self._reads.items() if kf[0][0] <= after < kf[0][1] and not kf[1].done()),
            None,
        )
        if pending is not None:  # another subscriber reads this range: share it
            (first, last), read = pending
            result = await asyncio.shield(read)
            if epoch != self._epoch:  # reset meanwhile
                self._clear(epoch)
            elif cached := self._cached(after, end):
                return cached
            elif (first, last) == (after, end):
                return result
            elif shared := [e for e in result if after < e.seq <= end]:
                return shared
        return await asyncio.shield(self._start_read(epoch, after, end, upto))

    async def prefetch(self, head: int) -> None:
        """Read the entries up to ``head`` into the cache (before a wake-up),
        so the subscribers it wakes find them there."""
        if self._epoch is None:
            return  # no subscriber has read yet
        after = max(self._high, head - self._max_entries)
        while after < head:
            events = await self.read(self._epoch, after, head, PREFETCH_PAGE)
            # none: a page of purged positions
            after = events[-1].seq if events else min(head, after + PREFETCH_PAGE)

    def chunks(
        self,
        transport: str,
        events: list[Event],
        frame: Callable[[Event], bytes],
        max_bytes: int,
    ) -> list[Chunk]:
        """The framed ``events`` joined into chunks of about ``max_bytes``.
        A run of consecutive seqs (what every unfiltered subscriber at one
        position sends) is chunked once and shared."""
        first, last = events[0].seq, events[-1].seq
        shared = last - first + 1 == len(events)
        key = (transport, first, last)
        if shared and (out := self._chunked.get(key)) is not None:
            return out
        out = _chunk(transport, events, frame, max_bytes)
        if shared:
            _remember(self._chunked, key, out, MAX_RUNS)
        return out

    def _cached(self, after: int, end: int) -> list[Event]:
        run = self._runs.get((after, end))
        if run is not None:
            return run  # subscribers at one position share the list (read only)
        out: list[Event] = []
        events = self._events
        seq = after + 1
        while seq <= end and (event := events.get(seq)) is not None:
            out.append(event)
            seq += 1
        if out and out[-1].seq == end:
            _remember(self._runs, (after, end), out, MAX_RUNS)
        return out

    def _start_read(
        self, epoch: str, after: int, end: int, head: int
    ) -> asyncio.Future[list[Event]]:
        key = (after, end)
        task = asyncio.get_running_loop().create_task(self._read_store(epoch, after, end, head))
        self._reads[key] = task
        task.add_done_callback(lambda done: self._read_done(key, done))
        return task

    def _read_done(self, key: tuple[int, int], task: asyncio.Task[list[Event]]) -> None:
        self._reads.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved: its readers get it (or were cancelled)

    async def _read_store(self, epoch: str, after: int, end: int, head: int) -> list[Event]:
        entries = await self._store.read_seq_range(after, end, end - after)
        events = [Event(entry, epoch) for entry in entries]
        if epoch == self._epoch:
            for event in events:
                if event.seq > head - self._max_entries:  # near the head: live readers follow
                    self._keep(event)
        return events

    def _keep(self, event: Event) -> None:
        if event.seq in self._events:
            return
        self._events[event.seq] = event
        self._high = max(self._high, event.seq)
        self._bytes += event.size()
        while len(self._events) > self._max_entries or self._bytes > self._max_bytes:
            oldest = next(iter(self._events))
            self._bytes -= self._events.pop(oldest).size()

    def _clear(self, epoch: str) -> None:
        self._epoch = epoch
        self._events.clear()
        self._high = 0
        self._runs.clear()
        self._chunked.clear()
        self._bytes = 0


def _chunk(
    transport: str, events: list[Event], frame: Callable[[Event], bytes], max_bytes: int
) -> list[Chunk]:
    out: list[Chunk] = []
    parts: list[bytes] = []
    size = 0
    for event in events:
        framed = event.framed(transport, frame)
        parts.append(framed)
        size += len(framed)
        if size >= max_bytes:
            out.append(Chunk(b"".join(parts), event, len(parts)))
            parts, size = [], 0
    if parts:
        out.append(Chunk(b"".join(parts), events[-1], len(parts)))
    return out


K = TypeVar("K")
V = TypeVar("V")


def _remember(memo: dict[K, V], key: K, value: V, most: int) -> None:
    memo[key] = value
    if len(memo) > most:
        del memo[next(iter(memo))]  # the oldest
