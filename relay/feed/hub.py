"""Wake-ups for subscriptions: a version counter and one shared event.

A subscription is a cursor over the store plus this signal; nothing is
queued per subscriber, so a slow one only lags. Commits in this process
notify at once (the ingestor's listener); commits by other processes that
share the store (hypercorn workers, other hosts) are pushed by the store
where it can (Postgres LISTEN/NOTIFY), and otherwise seen by a cheap
head-seq poll that runs only while someone is subscribed (SQLite). With a
push the poll is only a slower safety net; while the store has lost its
push (until it restores it) the poll runs at its base interval again. The
same task ticks the heartbeat: every ``heartbeat_s`` it wakes the waiters
without a new version, and they send a keep-alive. No timer per waiter.

Wake-ups are coalesced so that, while commits stream in, fan-outs take a
bounded share of the loop. The hub measures each fan-out F (the CPU time
of this thread from a wake-up until nine in ten of the woken subscribers
wait again; CPU, so that a busy machine does not inflate it) and wakes
again no sooner than ``FANOUT_SPACING`` x F later (at most
``MAX_WAKE_INTERVAL_S``): fan-outs then take at most about a fifth of the
time. A cheap fan-out, or a quiet relay, wakes at once. Before waking, the
hub lets the feed read the new entries once for all (``before_wake``).
With no subscription open, a commit only moves the version.

Woken subscribers read up to ``woken_head``, the head as of the wake-up,
not ``known_head``, which moves at every commit while the fan-out runs:
subscribers at one position then read the same range (one shared read and
framing), and a fan-out does not chase the commits that land during it;
those wait for the next wake-up, so under load one wake-up covers several
commits and each subscriber writes less often. The version and
``woken_head`` change together, so a subscriber that has read up to
``woken_head`` at version v has a wake-up coming for anything committed
after.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from stores.base import FeedStore

log = logging.getLogger("dfos_relay.feed")

DEFAULT_POLL_INTERVAL_S = 0.25
PUSHED_POLL_INTERVAL_S = 2.0  # with pushed commits the poll is only a safety net
DEFAULT_HEARTBEAT_S = 15.0
FANOUT_SPACING = 4.0  # the next wake-up waits 4x the last fan-out: fan-outs <= ~1/5 of the time
FANOUT_DONE = 0.9  # a fan-out is over when this share of the woken subscribers wait again
MAX_WAKE_INTERVAL_S = 1.0


class FeedHub:
    def __init__(
        self,
        head_seq: Callable[[], Awaitable[int]],
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        subscribed: Callable[[], bool] = lambda: False,
    ) -> None:
        self._head_seq = head_seq
        self._subscribed = subscribed  # any subscription open (the feed counts them)
        self._base_poll_s = poll_interval_s
        self._poll_interval_s = poll_interval_s
        self._poll_now = asyncio.Event()  # the interval dropped: poll at once
        self._heartbeat_s = heartbeat_s
        self._last_wake = float("-inf")
        self._pending: asyncio.TimerHandle | None = None
        self._fanout_s = 0.0  # the CPU time the last complete fan-out took
        self._fanout_start = 0.0
        self._fanout_left = 0  # woken subscribers still to wait again
        self._event = asyncio.Event()
        self.version = 0
        self.known_head = 0  # moves at every commit
        self.woken_head = 0  # the head as of the last wake-up: what woken subscribers read to
        self._waiters = 0
        self._poller: asyncio.Task[None] | None = None
        self._unwatch: Callable[[], Awaitable[None]] | None = None
        # run before each wake-up: the feed reads the new entries once, for all
        self.before_wake: Callable[[int], Awaitable[None]] | None = None
        self._waking: asyncio.Task[None] | None = None

    def notify(self, head_seq: int | None = None) -> None:
        """Something was committed (up to ``head_seq`` when known); without
        a head (the relay stops, or a reset), wake everyone at once."""
        if head_seq is None:
            self._release(new_version=True)
            return
        if head_seq <= self.known_head:
            return
        self.known_head = head_seq
        idle = not self._waiters and not self._subscribed()
        if idle and self._pending is None and self._waking is None:
            # Nobody follows: no prefetch task, no fan-out and no CPU-clock
            # syscall per commit. A subscriber that comes to wait sees the
            # new version at once.
            # (With subscribers all busy writing, a fan-out still paces them.)
            self.version += 1
            self.woken_head = head_seq
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._wake()
            return
        if self._pending is not None:
            return  # a wake-up is due; it covers this commit too
        spacing = min(FANOUT_SPACING * self._fanout_s, MAX_WAKE_INTERVAL_S)
        delay = self._last_wake + spacing - loop.time()
        if delay <= 0:
            self._wake()
        else:
            self._pending = loop.call_later(delay, self._wake)

    def reset_head(self, head_seq: int) -> None:
        """The log's seq domain was reset (a new epoch): its head may be lower
        than the one known (commits lost with a database server), and a
        subscriber reading to a head past the log would step over positions
        as if purged, then miss the ops that take them. Wake everyone."""
        self.known_head = head_seq
        self._release(new_version=True)

    def _wake(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._waking is not None:
            return  # the wake-up being prepared covers this version too
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self.before_wake is None:
            self._fan_out()
        else:
            self._waking = loop.create_task(self._prepare_and_fan_out(self.before_wake))

    async def _prepare_and_fan_out(self, before_wake: Callable[[int], Awaitable[None]]) -> None:
        try:
            await before_wake(self.known_head)
        except Exception as exc:  # subscribers then read for themselves
            log.warning("feed prefetch failed: %s", exc)
        finally:
            self._waking = None
            self._fan_out()

    def _fan_out(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._last_wake = asyncio.get_running_loop().time()
            self._fanout_start = time.thread_time()
            self._fanout_left = int(FANOUT_DONE * self._waiters)
        self._release(new_version=True)

    def _release(self, new_version: bool = False) -> None:
        """Wake every waiter: with a new version (something was committed),
        or without one (a heartbeat tick)."""
        if new_version:
            self.version += 1
        self.woken_head = self.known_head
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, version: int) -> bool:
        """Until the version moves past ``version`` (True), or the heartbeat
        tick (False: nothing new, send a keep-alive)."""
        if self.version != version:
            return True
        if self._fanout_left > 0:
            self._fanout_left -= 1
            if self._fanout_left == 0:
                self._fanout_s = time.thread_time() - self._fanout_start
        self._waiters += 1
        self._ensure_poller()
        try:
            await self._event.wait()
        finally:
            self._waiters -= 1
        return self.version != version

    def _ensure_poller(self) -> None:
        if self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        beat = loop.time() + self._heartbeat_s
        self._poll_now.clear()  # this first round polls now anyway
        try:
            while self._waiters > 0:
                try:
                    self.notify(await self._head_seq())
                except Exception as exc:  # the store is down: subscribers just wait
                    log.warning("feed head poll failed: %s", exc)
                if loop.time() >= beat:
                    beat = loop.time() + self._heartbeat_s
                    self._release()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(self._poll_interval_s, self._heartbeat_s)):
                        await self._poll_now.wait()
                self._poll_now.clear()
        finally:
            self._poller = None

    async def watch(self, store: FeedStore) -> None:
        """Take commits pushed by the store (Postgres LISTEN/NOTIFY), if it can.
        The poll stays at its base interval until the store says it pushes
        (which may be later: its first LISTEN is retried when it fails)."""
        try:
            self._unwatch = await store.watch_commits(self.notify, self._pushed)
        except Exception as exc:  # the head-seq poll still covers other processes
            log.warning("cannot watch commits, polling instead: %s", exc)
            self._unwatch = None

    def _pushed(self, listening: bool) -> None:
        """The store pushes commits (now or again), or has lost its push: poll only
        as a safety net, or at the base interval, from now on."""
        if listening:
            self._poll_interval_s = max(self._base_poll_s, PUSHED_POLL_INTERVAL_S)
        else:
            self._poll_interval_s = self._base_poll_s
            self._poll_now.set()  # not after the rest of a long sleep

    async def close(self) -> None:
        """Stop watching and polling, and wake every waiter (the relay stops)."""
        unwatch, self._unwatch = self._unwatch, None
        if unwatch is not None:
            await unwatch()
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._waking is not None:
            self._waking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._waking
        self.notify()
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
