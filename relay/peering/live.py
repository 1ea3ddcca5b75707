"""Sync-in by following each ``live`` peer's changes feed.

Each op event is ingested through the normal pipeline (peers are
untrusted); the peer's progress token is saved after the ingest returns,
under the peer cursor key ``<url>#changes``, so a restart resumes exactly.
A peer without a feed (a v0.7.1 relay) falls back to ``GET /log`` polling.
On a gap (410: the peer's epoch changed, or our position left its replay
window) the relay reconciles with the peer (a full log replay if the peer
cannot reconcile), then follows from the peer's head at the time the
repair began.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import httpx

from peer.feed import (
    FeedClientError,
    FeedEvent,
    FeedGapError,
    FeedUnavailable,
    FollowOptions,
    follow,
)

from .config import PeeringConfig
from .host import PeeringHost
from .repair import ReconcileRepair
from .sync import SyncIn
from .tasks import cancel_all

log = logging.getLogger("dfos_relay.peering")

FEED_CURSOR_SUFFIX = "#changes"
LIVE_BATCH = 100  # ops ingested together while catching up


class LiveFollow:
    def __init__(
        self,
        peer_urls: Sequence[str],
        sync: SyncIn,
        config: PeeringConfig,
        repair: ReconcileRepair | None = None,
    ) -> None:
        self._peers = tuple(peer_urls)
        self._sync = sync
        self._config = config
        self._repair = repair
        self._tasks: list[asyncio.Task[None]] = []
        self.polling: set[str] = set()  # peers without a feed, polled instead

    def start(self, host: PeeringHost) -> None:
        self._tasks = [
            asyncio.create_task(self._run(host, url), name=f"live follow {url}")
            for url in self._peers
        ]

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []

    def cursor_key(self, url: str) -> str:
        scope = self._config.scope
        key = url + FEED_CURSOR_SUFFIX
        return key if scope is None else f"{key}#{scope.scope_id}"

    async def _run(self, host: PeeringHost, url: str) -> None:
        key = self.cursor_key(url)
        delay = self._config.backoff_base_s
        while True:
            try:
                await self._follow(host, url, key)
                delay = self._config.backoff_base_s
            except FeedUnavailable:
                log.info("peer %s has no changes feed; polling its log instead", url)
                self.polling.add(url)
                await self._poll(url)
                return
            except FeedGapError as exc:
                log.warning("feed gap at peer %s (%s); repairing", url, exc)
                await self._resync(host, url, key)
            except (FeedClientError, httpx.HTTPError, ValueError) as exc:
                log.warning("following peer %s failed: %s", url, exc)
                await asyncio.sleep(delay)
                delay = min(self._config.backoff_max_s, delay * 2)

    async def _follow(self, host: PeeringHost, url: str, key: str) -> None:
        since = await host.store.get_peer_cursor(key)
        options = FollowOptions(
            live=True,
            max_retries=0,  # reconnects are ours: re-read the saved token each time
            backoff_base_s=self._config.backoff_base_s,
            backoff_max_s=self._config.backoff_max_s,
            scope=() if self._config.scope is None else self._config.scope.members,
        )
        batch: list[FeedEvent] = []
        caught_up = False
        async for event in follow(url, since=since, options=options):
            if event.kind == "op":
                batch.append(event)
            if event.kind == "eose":
                caught_up = True
            if batch and (caught_up or len(batch) >= LIVE_BATCH or event.kind == "eose"):
                await self._ingest(host, url, key, batch)
                batch = []

    async def _ingest(self, host: PeeringHost, url: str, key: str, batch: list[FeedEvent]) -> None:
        await host.ingest([e.data["jwsToken"] for e in batch], source=url)
        token = batch[-1].token
        if token:
            await host.store.set_peer_cursor(key, token)

    async def _poll(self, url: str) -> None:
        interval = self._config.sync_interval_s or 1.0
        while True:
            await self._sync.sync_peer(url)
            await asyncio.sleep(interval)

    async def _resync(self, host: PeeringHost, url: str, key: str) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            feed = (await http.get(url.rstrip("/") + "/.well-known/dfos-relay")).json()
        described = feed.get("changesFeed") or {}
        epoch, head = str(described.get("epoch", "")), int(described.get("headSeq", 0))
        # Reconciliation moves only the difference; a full replay of the
        # peer's log is the fallback for a peer that cannot reconcile.
        if self._repair is None or not await self._repair.repaired(url):
            await self._sync.sync_peer(url, from_start=True)
        await host.store.set_peer_cursor(key, f"{epoch}.{head}")
