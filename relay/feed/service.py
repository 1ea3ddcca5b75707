"""One relay's changes feed: admission (gaps, caps), and each
subscription's message stream (tail, bootstrap, live follow).

The epoch is watched while anyone follows: a reset of the log's seq domain
(an admin purge, ``dfos-relay feed reset-epoch``, an import) ends every live
subscription of the old epoch with the same 410 body a new request would get,
so followers bootstrap again instead of tailing positions that no longer mean
what they did. This process's purges are seen at once; other processes'
resets at the next head poll."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from relay.feed.cache import EventCache
from relay.feed.errors import FeedBusy, FeedGone, FeedRequestError
from relay.feed.filters import FeedFilter
from relay.feed.hub import FeedHub
from relay.feed.messages import Eose, Event, Events, FeedMessage, Heartbeat, Snapshot, Status
from relay.feed.snapshot import scoped_snapshot_items, snapshot_items
from relay.feed.tokens import ProgressToken
from relay.loop_slices import Slices
from relay.scope import ScopeTracker
from relay.scope.closure import effective_scope_in_pages
from stores.base import FeedEntry, FeedStore

PAGE = 500
TRANSPORTS = ("sse", "websocket")


@dataclass(frozen=True, slots=True)
class FeedConfig:
    replay_window: int | None = None  # keep the last N entries replayable; None: all
    max_subscribers: int = 1000
    heartbeat_s: float = 15.0
    send_timeout_s: float = 30.0  # a consumer unwritable this long is closed
    poll_interval_s: float = 0.25  # head-seq check for commits by other processes
    retry_after_s: int = 5


class Feed:
    def __init__(self, store: FeedStore, config: FeedConfig, stream_id: Callable[[], str]) -> None:
        self.store = store
        self.config = config
        self._stream_id = stream_id
        self.subscribers: dict[str, int] = dict.fromkeys(TRANSPORTS, 0)
        self.hub = FeedHub(
            self._poll_head, config.poll_interval_s, config.heartbeat_s,
            subscribed=lambda: any(self.subscribers.values()),
        )  # fmt: skip
        self.cache = EventCache(store)
        self.hub.before_wake = self._prefetch
        self.epoch: str | None = None  # the store's epoch as last read
        # The store doubts the epoch (a restarted database server) before
        # this process reads or commits anything the change may concern:
        # subscriptions re-read it before they send what they read.
        self._doubts = self._settled = 0
        store.watch_epoch(self._doubt_epoch)

    async def refresh_epoch(self) -> str:
        """Read the store's epoch; on a change, wake every subscription (those
        of the old epoch end with a 410), at the log's head as it is now."""
        epoch = await self.store.get_feed_epoch()
        if epoch != self.epoch:
            changed = self.epoch is not None
            head = await self.store.log_length() if changed else 0
            self.epoch = epoch
            if changed:
                self.hub.reset_head(head)
        return epoch

    def _doubt_epoch(self) -> None:
        self._doubts += 1
        self.hub.notify()  # followers re-read it, even with nothing new to send

    async def current_epoch(self) -> str | None:
        """The epoch, read again if the store doubted it since the last read."""
        doubts = self._doubts
        if doubts != self._settled:
            await self.refresh_epoch()
            self._settled = doubts
        return self.epoch

    async def _poll_head(self) -> int:
        await self.refresh_epoch()  # another process may have reset it
        return await self.store.log_length()

    async def _prefetch(self, head: int) -> None:
        await self.cache.prefetch(head)  # read once for every subscriber the hub wakes

    async def describe(self) -> dict[str, Any]:
        """The well-known ``changesFeed`` document."""
        head = await self._head()
        return {
            "epoch": await self.refresh_epoch(),
            "minSeq": self.min_seq(head),
            "headSeq": head,
            "transports": list(TRANSPORTS),
        }

    def min_seq(self, head: int) -> int:
        window = self.config.replay_window
        return 1 if window is None else max(1, head - window + 1)

    async def _head(self) -> int:
        head = await self.store.log_length()
        self.hub.notify(head)
        return head

    async def open(self, flt: FeedFilter, transport: str, bootstrap_url: str) -> Subscription:
        """Admit a subscription or raise ``FeedError`` (410, 400, 503). The
        slot is taken before the first await, so concurrent opens cannot all
        pass the cap; the subscription returned holds it until it ends."""
        if sum(self.subscribers.values()) >= self.config.max_subscribers:
            raise FeedBusy("too many subscribers; retry later", self.config.retry_after_s)
        self.subscribers[transport] += 1
        try:
            return await self._admit(flt, transport, bootstrap_url)
        except BaseException:
            self.subscribers[transport] -= 1
            raise

    async def _admit(self, flt: FeedFilter, transport: str, bootstrap_url: str) -> Subscription:
        epoch = await self.refresh_epoch()
        head = await self._head()
        min_seq = self.min_seq(head)
        start = 0
        if flt.mode == "tail" and flt.since is not None:
            since = flt.since
            if since.epoch is not None and since.epoch != epoch:
                raise FeedGone(
                    f"token is from epoch {since.epoch}; this log is epoch {epoch}",
                    min_seq, epoch, bootstrap_url,
                )  # fmt: skip
            if since.seq > head:
                raise FeedRequestError(f"since {since.seq} is ahead of head {head}", headSeq=head)
            if since.seq < min_seq - 1:
                raise FeedGone(
                    f"since {since.seq} is below the replay window (minSeq {min_seq})",
                    min_seq, epoch, bootstrap_url,
                )  # fmt: skip
            start = since.seq
        elif flt.mode == "tail" and min_seq > 1:
            # no since is since 0, and the window no longer holds the start:
            # an explicit gap, never a tail that silently begins at minSeq
            raise FeedGone(
                f"the feed replays from minSeq {min_seq} only; bootstrap, or tail "
                f"since a position >= {min_seq - 1}",
                min_seq, epoch, bootstrap_url,
            )  # fmt: skip
        tracker = None
        if flt.scope is not None:
            # the closure as of where the consumer stands: it holds that much
            at = head if flt.mode == "bootstrap" else start
            # a page of the scope at a time, paced as a snapshot is: read at
            # once, a large scope held the loop for its whole closure
            pause = Slices().pause_when_due
            eff = await effective_scope_in_pages(self.store, flt.scope, at, pause)
            tracker = ScopeTracker(self.store, eff)
        return Subscription(self, flt, transport, epoch, start, head, bootstrap_url, tracker)


class Subscription:
    """A cursor over the store plus the hub's signal: O(1) memory."""

    def __init__(
        self,
        feed: Feed,
        flt: FeedFilter,
        transport: str,
        epoch: str,
        start: int,
        head: int,
        bootstrap_url: str,
        tracker: ScopeTracker | None = None,
    ) -> None:
        self.feed = feed
        self.tracker = tracker  # a scoped subscription: its effective scope, growing
        self.filter = flt
        self.transport = transport
        self.epoch = epoch
        self.cursor = start  # the last seq passed: sent, or filtered out before one sent
        self._head = head
        self._bootstrap_url = bootstrap_url
        self._active = True  # it holds the slot ``Feed.open`` took for it

    @property
    def token(self) -> ProgressToken:
        return ProgressToken(self.epoch, self.cursor)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Give the slot back (once); a subscription never run gives it back
        when it is dropped."""
        if self._active:
            self.feed.subscribers[self.transport] -= 1
            self._active = False

    def __del__(self) -> None:
        self.release()

    async def messages(self) -> AsyncIterator[FeedMessage]:
        flt = self.filter
        store = self.feed.store
        stream_id = self.feed._stream_id()
        if flt.mode == "bootstrap":
            s = self._head
            yield Status("bootstrap", s, self.epoch, stream_id, s)
            items = (
                snapshot_items(store, s, flt)
                if self.tracker is None
                else scoped_snapshot_items(store, s, self.tracker.effective)
            )
            async for item in items:
                yield Snapshot(item)
            self.cursor = s
            yield Eose(ProgressToken(self.epoch, s))
            if not flt.live:
                return
        else:
            yield Status("tail", None, self.epoch, stream_id, self._head)
        # after a bootstrap's EOSE the live part follows without another
        async for message in self._tail(eose_sent=flt.mode == "bootstrap"):
            yield message

    def passed(self, seq: int) -> None:
        """The transport has sent everything up to ``seq`` (the resume point)."""
        if seq > self.cursor:
            self.cursor = seq

    async def _tail(self, eose_sent: bool = False) -> AsyncIterator[FeedMessage]:
        flt = self.filter
        hub = self.feed.hub
        cache = self.feed.cache
        remaining = None if eose_sent else flt.limit  # it bounds the replay only
        last_eose = self.cursor if eose_sent else -1  # one EOSE per position
        woken = False
        while True:
            await self._check_epoch()
            version = hub.version  # read with the head: no wake-up can be missed
            # the hub knows the head: every commit notifies it (this process's at
            # once, others' by push or poll), so no store read per subscriber.
            # Once woken, read to the head as of the wake-up, so subscribers woken
            # together read one range (and share its events and chunks)
            head = hub.woken_head if woken else hub.known_head
            upto = head if flt.until_seq is None else min(head, flt.until_seq)
            while self.cursor < upto:
                batch = await cache.read(self.epoch, self.cursor, upto, PAGE)
                await self._check_epoch()  # the read may have reached a restarted server
                if not batch:  # a page of purged positions: no op is there to send
                    self.passed(min(upto, self.cursor + PAGE))
                    continue
                if self.tracker is not None:
                    events = await self._scoped(batch)
                elif flt.is_open:
                    events = batch
                else:
                    events = [e for e in batch if flt.matches_entry(e.entry)]
                end = batch[-1].seq
                if remaining is not None and len(events) >= remaining:
                    events = events[:remaining]
                    end = events[-1].seq
                if events:
                    yield Events(events, end)
                self.passed(end)  # the transport sent them all (it asked for more)
                if remaining is not None:
                    remaining -= len(events)
                    if remaining == 0:  # the replay is over; live goes on past it
                        yield Eose(self.token)
                        last_eose = self.cursor
                        if not flt.live:
                            return
                        eose_sent, remaining = True, None  # the rest streams at once
            done = flt.until_seq is not None and self.cursor >= flt.until_seq
            if not eose_sent or (done and last_eose != self.cursor):
                yield Eose(self.token)
                last_eose = self.cursor
                eose_sent, remaining = True, None  # the replay is over: live is not limited
            if done or not flt.live:
                return
            if not await hub.wait(version):
                yield Heartbeat()
            woken = True

    async def _check_epoch(self) -> None:
        """Raise ``FeedGone`` once the log's seq domain was reset under us."""
        epoch = await self.feed.current_epoch()
        if epoch is None or epoch == self.epoch:
            return
        raise FeedGone(
            f"the log's epoch changed from {self.epoch} to {epoch} (a reset or a purge); "
            "bootstrap again",
            self.feed.min_seq(self.feed.hub.known_head), epoch, self._bootstrap_url,
        )  # fmt: skip

    async def _scoped(self, batch: list[Event]) -> list[Event]:
        """The batch's in-scope events, each after the closure ops it brings in."""
        assert self.tracker is not None
        by_seq = {event.seq: event for event in batch}
        out: list[Event] = []
        late: list[FeedEntry] = []
        for admitted in await self.tracker.admit(e.entry for e in batch):
            if admitted.late:
                late.append(admitted.entry)
                continue
            event = by_seq[admitted.entry.seq]
            # late closure ops resume just before their dependant
            out.extend(Event(entry, self.epoch, event.seq - 1) for entry in late)
            late.clear()
            out.append(event)
        return out
