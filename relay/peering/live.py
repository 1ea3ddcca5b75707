"""Sync-in by following each ``live`` peer's changes feed.

Each op event is ingested through the normal pipeline (peers are
untrusted); the peer's progress token is saved after the ingest returns,
under the peer cursor key ``<url>#changes``, so a restart resumes exactly.
A peer without a feed (a v0.7.1 relay) falls back to ``GET /log`` polling.
On a gap (410: the peer's epoch changed, or our position left its replay
window) the relay reconciles with the peer (a full log replay if the peer
cannot reconcile), then follows from the peer's head at the time the
repair began.

The replication ledger's in-link (``relay.peering.ledger``): ``initial``
until the first EOSE, then ``live``; ``degraded_poll`` for a peer without a
feed; ``repairing`` from a gap until it is repaired, and while ops received
from the peer wait for a dependency (the applied token stops before the
first of them; what they miss is in the diagnostics). The peer's head seq
comes from the feed's status event and every op's seq. A paused in-link
stops following until it is resumed.

With a scope, the ops of a batch are ingested only when the scope holds
them (``scope_check``); a closure op the peer sends late is batched with
the op after it (its dependant), so the two are judged together.

A feed that sends no event for ``live_stall_s`` before its EOSE (heartbeat
comments only, or no answer at all) is stalled, on its first connection or
any that ``follow`` opens again after the peer ended one: heartbeats keep the
connection inside its read timeout, so without this bound the link would
stay ``initial`` forever. A stall is the peer's failure: the in-link goes
``degraded_poll``, the peer's log is polled (as for a peer without a feed)
while the feed is backed off, then the feed is tried again; its next EOSE
makes the link ``live``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any, cast

from peer.feed import (
    FeedClientError,
    FeedEvent,
    FeedGapError,
    FeedUnavailable,
    FollowOptions,
    follow,
)
from peer.http import HttpPeerClient
from relay.rules.outcomes import IngestionResult, Status

from .config import PeeringConfig
from .directory import WellKnownClient
from .host import PeeringHost
from .ledger import LinkLedger, describe
from .link_view import token_seq
from .repair import ReconcileRepair
from .sync import SyncIn
from .tasks import cancel_all

log = logging.getLogger("dfos_relay.peering")

FEED_CURSOR_SUFFIX = "#changes"
LIVE_BATCH = 100  # ops ingested together while catching up
# ... holding at most this much token text: a peer's events may each be
# near the feed client's MAX_EVENT_BYTES, and a batch waits in memory
LIVE_BATCH_CHARS = 8 * 1024 * 1024
STALLED = "feedStalled"  # in-link diagnostics: why a feed is not followed (until its EOSE)
REPLAY_CALLS = 20  # catch-up calls (of a few budgets each) one gap-repair attempt makes at most


class FeedStalled(FeedClientError):
    """The feed sent no event for ``live_stall_s`` before its EOSE."""


class LiveFollow:
    def __init__(
        self,
        peer_urls: Sequence[str],
        sync: SyncIn,
        config: PeeringConfig,
        repair: ReconcileRepair | None = None,
        client: object = None,
    ) -> None:
        self._peers = tuple(peer_urls)
        self._sync = sync
        self._client = client  # the peering's peer client: reads well-known documents
        self._config = config
        self._repair = repair
        self._tasks: list[asyncio.Task[None]] = []
        self.polling: set[str] = set()  # peers without a feed, polled instead
        self.ledger = LinkLedger()  # the peering service shares its own
        self._waiting: dict[str, dict[str, str]] = {}  # per peer: cid -> token of waiting ops
        # peers whose log replay after a gap is not done: the log cursor before it
        self._replaying: dict[str, str | None] = {}
        self._caught_up: set[str] = set()  # peers whose feed reached EOSE since the last connect

    def start(self, host: PeeringHost) -> None:
        self._waiting.clear()  # another process may have pulled since: the ledger tells
        self._tasks = [
            asyncio.create_task(self._run(host, url), name=f"live follow {url}")
            for url in self._peers
        ]

    async def stop(self) -> None:
        await cancel_all(self._tasks, quiet=True)  # a task's own failure was logged
        self._tasks = []

    def cursor_key(self, url: str) -> str:
        scope = self._config.scope
        key = url + FEED_CURSOR_SUFFIX
        return key if scope is None else f"{key}#{scope.scope_id}"

    async def _run(self, host: PeeringHost, url: str) -> None:
        key = self.cursor_key(url)
        delay = self._config.backoff_base_s
        await self.ledger.set_state(url, "in", "initial")
        while True:
            await self.ledger.wait_unpaused(url, "in")
            self._caught_up.discard(url)
            try:
                await self._follow(host, url, key)
                delay = self._config.backoff_base_s
            except FeedUnavailable:
                log.info("peer %s has no changes feed; polling its log instead", url)
                self.polling.add(url)
                await self.ledger.set_state(url, "in", "degraded_poll")
                await self._poll(url)
                return
            except FeedStalled as exc:
                delay = await self._stalled(url, exc, self._fresh(url, delay))
            except FeedGapError as exc:
                delay = self._fresh(url, delay)
                log.warning("feed gap at peer %s (%s); repairing", url, exc)
                await self.ledger.set_state(url, "in", "repairing")
                try:
                    await self._resync(host, url, key)
                except Exception as failed:  # still repairing: the next gap goes on with it
                    delay = await self._failed(url, "repairing", failed, delay)
                    continue
                await self.ledger.set_state(url, "in", "live")
                # A repair is a reconcile run or a replay of the peer's log: a
                # peer that answers every position with a gap must not have us
                # repair in a loop, so the next one waits as after a failure.
                await asyncio.sleep(delay)
                delay = min(self._config.backoff_max_s, delay * 2)
            except Exception as exc:  # a peer's fault (or ours): logged, backed off, retried
                delay = await self._failed(url, "following", exc, self._fresh(url, delay))

    def _fresh(self, url: str, delay: float) -> float:
        """``delay``, or the base delay again once the feed caught up since
        the last connect (the faults before are over)."""
        return self._config.backoff_base_s if url in self._caught_up else delay

    async def _failed(self, url: str, doing: str, exc: Exception, delay: float) -> float:
        """Log and record the failure, wait ``delay``; the next delay."""
        log.warning("%s peer %s failed: %s", doing, url, describe(exc))
        await self.ledger.failure(url, "in", exc)
        await asyncio.sleep(delay)
        return min(self._config.backoff_max_s, delay * 2)

    async def _stalled(self, url: str, exc: FeedStalled, delay: float) -> float:
        """Show the stall, poll the peer's log while the feed waits ``delay``;
        the next delay."""
        log.warning("following peer %s: %s; polling its log meanwhile", url, exc)
        # the reason stays in the diagnostics (a poll's success clears last_error)
        diagnostics = {**self.ledger.get(url, "in").diagnostics, STALLED: describe(exc)}
        self.ledger.note(url, "in", diagnostics=diagnostics)
        await self.ledger.failure(url, "in", exc)
        await self.ledger.set_state(url, "in", "degraded_poll")
        loop = asyncio.get_running_loop()
        ends = loop.time() + delay
        interval = self._config.sync_interval_s or 1.0
        while True:
            await self._poll_once(url)
            left = ends - loop.time()
            if left <= 0:
                return min(self._config.backoff_max_s, delay * 2)
            await asyncio.sleep(min(interval, left))

    async def _follow(self, host: PeeringHost, url: str, key: str) -> None:
        try:
            async with asyncio.timeout(self._config.live_stall_s) as stall:
                await self._follow_within(host, url, key, stall)
        except TimeoutError as exc:
            if not stall.expired():
                raise
            seconds = self._config.live_stall_s
            raise FeedStalled(f"{url}: its feed sent no event for {seconds}s before EOSE") from exc

    async def _follow_within(
        self, host: PeeringHost, url: str, key: str, stall: asyncio.Timeout
    ) -> None:
        """Follow the feed; ``stall`` is armed while an EOSE is awaited and
        re-armed by every event (a long catch-up is not a stall). Each
        connection awaits its own EOSE: one the peer ended and ``follow``
        opened again arms ``stall`` anew, whatever it sends first (a status
        event, or heartbeats only)."""
        since = await host.store.get_peer_cursor(key)
        loop = asyncio.get_running_loop()
        awaiting_eose = True

        def connecting() -> None:
            nonlocal awaiting_eose
            awaiting_eose = True
            stall.reschedule(loop.time() + self._config.live_stall_s)

        options = FollowOptions(
            live=True,
            # a failed connection ends follow(), and _run reconnects from the saved
            # token; a stream the peer ended follow() opens again itself (on_connect)
            max_retries=0,
            backoff_base_s=self._config.backoff_base_s,
            backoff_max_s=self._config.backoff_max_s,
            scope=() if self._config.scope is None else self._config.scope.members,
            on_connect=connecting,
        )
        batch: list[FeedEvent] = []
        held = 0  # token characters in the batch
        caught_up = False
        async for event in follow(url, since=since, options=options):
            if self.ledger.paused(url, "in"):
                return  # paused: nothing more is ingested; _run waits for the resume
            if event.kind == "status":  # the head as of this connection (an epoch may reset it)
                self._seen_head(url, event.data.get("headSeq"), at_connect=True)
            if event.kind == "op":
                batch.append(_slim(event))
                token = event.data.get("jwsToken")
                held += len(token) if isinstance(token, str) else 0
            if event.kind == "eose":
                caught_up = True
                self._caught_up.add(url)
                self._seen_head(url, event.data.get("seq"))
                if not batch:
                    await self._record(url, [], [], caught_up)
            full = len(batch) >= LIVE_BATCH or held >= LIVE_BATCH_CHARS
            ready = caught_up or full or event.kind == "eose"
            if batch and ready and not _before_dependant(batch, held):
                stall.reschedule(None)  # the peer's silence is timed, not our store's
                await self._ingest(host, url, key, batch, caught_up)
                batch, held = [], 0
            if event.kind == "eose":
                awaiting_eose = False
            stall.reschedule(loop.time() + self._config.live_stall_s if awaiting_eose else None)

    async def _ingest(
        self, host: PeeringHost, url: str, key: str, batch: list[FeedEvent], caught_up: bool
    ) -> None:
        tokens = [e.data.get("jwsToken") for e in batch]
        if not all(isinstance(t, str) for t in tokens):
            raise FeedClientError(f"{url}: an op event without a jwsToken string")
        kept, results = await self._sync.scope_check.ingest(host, url, tokens)
        token = batch[-1].token
        if token:
            await host.store.set_peer_cursor(key, token)
        await self._record(url, batch, results, caught_up, [batch[i] for i in kept])

    def _seen_head(self, url: str, head: object, at_connect: bool = False) -> None:
        if isinstance(head, int) and not isinstance(head, bool):
            known = 0 if at_connect else self.ledger.get(url, "in").remote_head or 0
            self.ledger.note(url, "in", remote_head=max(known, head))

    async def _record(
        self,
        url: str,
        batch: list[FeedEvent],
        results: list[IngestionResult],
        caught_up: bool,
        ingested: list[FeedEvent] | None = None,
    ) -> None:
        """The in-link after a batch: tokens, ops that wait, state, success.
        ``results`` answer ``ingested`` (the batch less what was out of scope)."""
        link = self.ledger.get(url, "in")
        waiting = self._waiting.setdefault(url, dict(link.diagnostics.get("waiting") or {}))
        for event, result in zip(batch if ingested is None else ingested, results, strict=False):
            reason = result.reason
            if result.status is Status.REJECTED and reason and reason.is_dependency and event.token:
                waiting[result.cid] = event.token
        if batch:
            self._seen_head(url, batch[-1].data.get("seq"))
        still, _ = await self.ledger.waiting(url, waiting)
        self._waiting[url] = still
        received = batch[-1].token if batch and batch[-1].token else link.received_token
        applied = _before_first(still.values()) or received
        changes: dict[str, object] = {
            "received_token": received,
            "applied_token": applied,
            "pending_tokens": tuple(sorted(still.values(), key=_seq_of)),
        }
        head = self.ledger.get(url, "in").remote_head
        if caught_up and not still and (head is None or _seq_of(applied or "") >= head):
            changes["caught_up_ms"] = self.ledger.clock()
        if caught_up and STALLED in link.diagnostics:
            diagnostics = dict(self.ledger.get(url, "in").diagnostics)
            diagnostics.pop(STALLED, None)
            changes["diagnostics"] = diagnostics
        await self.ledger.success(url, "in", **changes)
        if caught_up:
            await self.ledger.set_state(url, "in", "repairing" if still else "live")
            if still and self._repair is not None:
                self._repair.request(url)  # the peer may hold what they wait for

    async def _poll(self, url: str) -> None:
        interval = self._config.sync_interval_s or 1.0
        while True:
            await self.ledger.wait_unpaused(url, "in")
            await self._poll_once(url)
            await asyncio.sleep(interval)

    async def _poll_once(self, url: str) -> None:
        try:
            await self._sync.catch_up(url, cycles=1)  # one budget an interval, as sync does
        except Exception as exc:  # our store, say: the poll goes on after a pause
            log.warning("polling peer %s failed: %s", url, describe(exc))
            await self.ledger.failure(url, "in", exc)

    async def _resync(self, host: PeeringHost, url: str, key: str) -> None:
        self._waiting.pop(url, None)  # the repair replays what they waited for
        feed = await self._well_known(url)
        described = feed.get("changesFeed")
        if not isinstance(described, dict):
            described = {}
        epoch, head = described.get("epoch"), described.get("headSeq")
        if not isinstance(epoch, str) or not isinstance(head, int) or isinstance(head, bool):
            raise FeedClientError(f"{url}: its well-known document names no feed epoch and head")
        # Reconciliation moves only the difference; a full replay of the
        # peer's log is the fallback for a peer that cannot reconcile. Only a
        # repair that got there moves the feed cursor to the head: a replay
        # cut short goes on (from where it stopped) at the next attempt.
        if not (self._repair is not None and await self._repair.repaired(url)):
            await self._replay(host, url)
        self._replaying.pop(url, None)
        await host.store.set_peer_cursor(key, f"{epoch}.{head}")

    async def _well_known(self, url: str) -> dict[str, Any]:
        """The peer's well-known document, read by the peer client: capped in
        bytes and time, as every other answer of a peer (a peer that answers
        410 and then an endless document would hold the repair, and memory)."""
        get = getattr(self._client, "get_well_known", None)
        if get is not None:
            return await cast(WellKnownClient, self._client).get_well_known(url)
        client = HttpPeerClient()  # a peer client that reads no documents (a test's)
        try:
            return await client.get_well_known(url)
        finally:
            await client.aclose()

    async def _replay(self, host: PeeringHost, url: str) -> None:
        """The peer's log from its start, in calls of a few budgets while
        they get on (``REPLAY_CALLS`` an attempt, then ``FeedClientError``:
        the next attempt, after a pause, goes on from where this one got).
        Until the replay saved a cursor of its own, an attempt starts over:
        the cursor from before the gap may mean nothing on the peer now."""
        log_key = self._sync.cursor_key(url)
        before = self._replaying.setdefault(url, await host.store.get_peer_cursor(log_key))
        for _ in range(REPLAY_CALLS):
            from_start = await host.store.get_peer_cursor(log_key) == before
            _, done = await self._sync.catch_up(url, from_start=from_start)
            if done:
                return
            if self._sync.failed(url) or self.ledger.paused(url, "in"):
                raise FeedClientError(f"{url}: its log could not be replayed to the end")
        raise FeedClientError(f"{url}: its log is not replayed to the end yet (going on)")


def _slim(event: FeedEvent) -> FeedEvent:
    """``event`` with only what a batch needs of its data (the token, its
    seq, its closure flag): whatever else a peer put in it is not held while
    it waits."""
    names = ("jwsToken", "seq", "closure")
    kept: dict[str, Any] = {k: event.data[k] for k in names if k in event.data}
    return FeedEvent(event.kind, kept, event.token)


def _before_dependant(batch: list[FeedEvent], held: int) -> bool:
    """The batch ends with a closure op sent late, just before the op that
    needs it: the two are ingested together, so that a scoped link's guard
    sees why it is in the scope (up to twice a batch's bytes: a peer that
    sends closure ops and no dependant gets them judged without one)."""
    return batch[-1].data.get("closure") is True and held < 2 * LIVE_BATCH_CHARS


def _seq_of(token: str) -> int:
    """The seq of a feed token ``<epoch>.<seq>`` (-1 when it is not one)."""
    seq = token_seq(token)
    return -1 if seq is None else seq


def _before_first(tokens: Iterable[str]) -> str | None:
    """The token just before the earliest of ``tokens`` (None: there are none)."""
    first = min(tokens, key=_seq_of, default=None)
    if first is None or _seq_of(first) < 1:
        return None
    epoch = first.rpartition(".")[0]
    return f"{epoch}.{_seq_of(first) - 1}"
