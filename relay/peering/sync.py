"""Sync-in (WEB-RELAY.md "Peering": "Sync-in uses cursor-based pagination
against the peer's global log"; "Convergence").

For each sync peer (concurrently, each under its own backoff) one cycle:

1. start from the cursor persisted for that peer (``None`` = the beginning);
2. fetch a page of the peer's GET /log and, while it is being ingested,
   prefetch the next page with the cursor the peer just issued;
3. ingest the page through ``relay.ingest(tokens, source=peer)`` so ops that
   arrive before their dependencies wait in the pending buffer and sequence
   when the dependency lands;
4. persist the cursor only after the page's ingest returned (committed).

Cursors are only ever values the peer issued: the page's ``cursor`` or, on
the final page where the peer answers ``cursor: null``, the CID of the last
entry it served (used only if that entry really is the op with that CID).

A page holding ops that are permanently rejected here ends the peer's cycle
(after its cursor is saved: re-reading it cannot help) and backs the peer
off. A peer that answers our cursor as unknown (its store was rebuilt)
costs one repair per cycle: when it can reconcile, everything up to its
current log head (whose CID it names in its changes feed) is reconciled
and paging resumes from that head; otherwise we read its log again from
the beginning, which is safe because ingest is idempotent. We never
invent a cursor. Each cycle
stops after ``sync_budget_ops`` entries per peer, or once it has asked a
peer for pages for ``sync_cycle_s`` seconds, so neither a huge peer nor a
slow one (every page just inside the request deadline) can starve the
others, whose next cycle waits for this one; the rest comes in later cycles.

With a scope configured (``PeeringConfig.scope``) the peer's scoped log is
read instead (``GET /log?scope=``: the scope and its closure), under its own
cursor key ``<url>#<scopeId>``; a scoped page's null cursor is followed by
the last entry the peer scanned (``scannedTo``), not the last one served,
since a closure op may be served behind its own position.

A scoped page's ops are ingested only when the scope holds them
(``scope_check``): a peer cannot fill a scoped mirror with other ops.

The replication ledger's in-link records each cycle: its failures, and
(for a peer that is polled: a sync-only peer, or a ``live`` peer without a
feed) the log cursors as received/applied tokens. A polled link is ``live``
once a cycle caught up (polling is what a sync-only peer was configured
for); a ``live`` peer polled for want of a feed stays ``degraded_poll``. A
paused in-link is skipped by cycles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from peer.base import PeerClient, PeerError, PeerInvalidOperations, PeerLogPage
from relay.rules.outcomes import IngestionResult, Status
from relay.scope.guard import read_pulled

from .backoff import Backoff
from .config import PeeringConfig
from .host import PeeringHost
from .ledger import LinkLedger
from .scope_check import ScopeCheck

if TYPE_CHECKING:
    from .repair import ReconcileRepair

log = logging.getLogger("dfos_relay.peering")

MAX_CYCLES_PER_CALL = 5  # budgets of a peer's log one catch-up call reads at most


class SyncIn:
    def __init__(
        self, peer_urls: Sequence[str], client: PeerClient, backoff: Backoff, config: PeeringConfig
    ) -> None:
        self._peers = tuple(peer_urls)
        self._client = client
        self._backoff = backoff
        self._config = config
        self._host: PeeringHost | None = None
        self._lock = asyncio.Lock()
        # Set by the peering service: repairs an unknown cursor by reconciling.
        self.repair: ReconcileRepair | None = None  # one cycle at a time: cursors advance in order
        self.ledger = LinkLedger()  # the peering service shares its own
        self.scope_check = ScopeCheck(None)  # the peering service shares its own
        self._failed: set[str] = set()  # peers whose last cycle failed

    def start(self, host: PeeringHost) -> None:
        self._host = host

    def cursor_key(self, url: str) -> str:
        scope = self._config.scope
        return url if scope is None else f"{url}#{scope.scope_id}"

    def stop(self) -> None:
        self._host = None

    async def sync_once(self) -> int:
        """One cycle over every sync peer that is not backed off; ops newly sequenced."""
        if self._host is None or not self._peers:
            return 0
        async with self._lock:
            ready = [url for url in self._peers
                     if self._backoff.ready(url) and not self.ledger.paused(url, "in")]  # fmt: skip
            counts = await asyncio.gather(*(self._sync_peer(url) for url in ready))
            return sum(counts)

    async def sync_peer(self, url: str, from_start: bool = False) -> int:
        """Page ``url``'s log (any peer, also one not configured for sync) until
        caught up, within ``MAX_CYCLES_PER_CALL`` budgets; the ops newly sequenced."""
        new, _ = await self.catch_up(url, from_start)
        return new

    def failed(self, url: str) -> bool:
        """The last cycle with ``url`` failed (it is backed off)."""
        return url in self._failed

    async def catch_up(
        self, url: str, from_start: bool = False, cycles: int = MAX_CYCLES_PER_CALL
    ) -> tuple[int, bool]:
        """Page ``url``'s log until caught up: (ops newly sequenced, whether
        it got there). ``from_start`` reads it from the beginning (a full
        resync). At most ``cycles`` budgets a call, so a peer whose log never
        ends cannot hold the caller: the cursor keeps what was read and the
        next call goes on from it. A failure (backed off) or a paused in-link
        leaves it short too."""
        if self._host is None or self.ledger.paused(url, "in"):
            return 0, False
        total = 0
        key = self.cursor_key(url)
        for cycle in range(cycles):
            before = await self._host.store.get_peer_cursor(key)
            async with self._lock:
                total += await self._sync_peer(url, start_over=from_start and cycle == 0)
            if self._host is None or url in self._failed:
                return total, False
            if await self._host.store.get_peer_cursor(key) == before:
                return total, True
        return total, False

    async def _sync_peer(self, url: str, start_over: bool = False) -> int:
        host = self._host
        assert host is not None
        budget = self._config.sync_budget_ops
        key = self.cursor_key(url)
        cursor = None if start_over else await host.store.get_peer_cursor(key)
        self._failed.discard(url)
        new = 0
        reset_allowed = True
        ends = time.monotonic() + self._config.sync_cycle_s  # pages after it: next cycle

        def more() -> bool:
            return budget > 0 and time.monotonic() < ends

        fetch: asyncio.Task[PeerLogPage] | None = self._fetch(url, cursor, budget)
        try:
            while fetch is not None:
                page = await fetch
                fetch = None
                if page.cursor_unknown and cursor is not None and reset_allowed:
                    log.warning(
                        "peer %s does not know our cursor %s; reading from the start", url, cursor
                    )
                    reset_allowed = False
                    cursor = await self._repair_cursor(url)
                    if cursor is not None:
                        await host.store.set_peer_cursor(key, cursor)
                    fetch = self._fetch(url, cursor, budget)
                    continue
                if not page.entries:
                    # a scoped page may scan past ops it leaves out and hold none:
                    # keep its position, or the next poll scans the same stretch
                    moved = page.cursor or page.scanned_to
                    if moved is None or moved == cursor:
                        break
                    await host.store.set_peer_cursor(key, moved)
                    cursor = moved
                    await self._ledger_tokens(url, moved)
                    budget -= 1  # an empty page costs something: a peer cannot loop us
                    if page.cursor is None or not more():
                        break
                    fetch = self._fetch(url, page.cursor, budget)
                    continue
                budget -= len(page.entries)
                if page.cursor is not None and page.cursor != cursor and more():
                    fetch = self._fetch(url, page.cursor, budget)
                tokens = [e.jws_token for e in page.entries]
                kept, results = await self.scope_check.ingest(host, url, tokens)
                new += sum(1 for r in results if r.status is Status.NEW)
                issued = _next_cursor(page, kept, results)
                if issued is not None and issued != cursor:
                    await host.store.set_peer_cursor(key, issued)
                    cursor = issued
                    await self._ledger_tokens(url, issued)
                invalid = sum(1 for r in results if r.reason is not None and r.reason.is_permanent)
                if invalid:  # a peer's log holds only ops it verified: this one lies
                    raise PeerInvalidOperations(url, f"{invalid} ops in its log do not verify")
        except PeerError as exc:
            self._failed.add(url)
            self._backoff.failure(url, "sync", exc)
            _record(host, url, None, ok=False)
            await self.ledger.failure(url, "in", exc)
            return new
        finally:
            if fetch is not None:
                fetch.cancel()
                with contextlib.suppress(asyncio.CancelledError, PeerError):
                    await fetch
        self._backoff.success(url)
        _record(host, url, new, ok=True)
        caught_up = {"caught_up_ms": self.ledger.clock()} if more() else {}
        await self.ledger.success(url, "in", **caught_up)
        await self.ledger.settle(url)
        return new

    async def _ledger_tokens(self, url: str, cursor: str) -> None:
        # A followed peer's in-link carries feed tokens, unless it is polled.
        if url not in self.ledger.followed or self.ledger.get(url, "in").state == "degraded_poll":
            await self.ledger.update(url, "in", received_token=cursor, applied_token=cursor)

    async def _repair_cursor(self, url: str) -> str | None:
        """After an unknown cursor: the peer's current log head, once a
        reconciliation has pulled everything before it; None (read the log
        from the start) when the peer cannot do both."""
        head_of = getattr(self._client, "log_head_cid", None)
        if self.repair is None or head_of is None:
            return None
        try:
            head = await head_of(url)  # taken first: what comes after is paged
        except PeerError:
            return None
        if head is None or not await self.repair.repaired(url):
            return None
        log.info("peer %s: reconciled instead of replaying its log", url)
        return str(head)

    def _fetch(self, url: str, after: str | None, budget: int) -> asyncio.Task[PeerLogPage]:
        limit = min(self._config.sync_page_limit, budget)
        scope = self._config.scope
        if scope is None:
            return asyncio.create_task(self._client.get_operation_log(url, after, limit))
        return asyncio.create_task(
            self._client.get_operation_log(url, after, limit, scope=scope.query_value())
        )


def _record(host: PeeringHost, url: str, lag: int | None, ok: bool) -> None:
    """Per-peer sync metrics, when the host keeps them (``relay.metrics``)."""
    metrics = getattr(host, "metrics", None)
    if metrics is not None:
        metrics.peer_sync(url, lag, ok)


def _next_cursor(
    page: PeerLogPage, kept: Sequence[int], results: Sequence[IngestionResult]
) -> str | None:
    """``kept``: the indexes of the page's entries that were ingested
    (``results`` answers them in order)."""
    if page.cursor is not None:
        return page.cursor
    if page.scanned_to is not None:  # a scoped page: the peer's own scan position
        return page.scanned_to
    last = page.entries[-1]
    # The caught-up page carries no cursor; the last entry's CID is the peer's
    # own log position, but only trust it if the token really is that op.
    if kept and kept[-1] == len(page.entries) - 1:
        return last.cid if results and results[-1].cid == last.cid else None
    # left out of scope (a peer ignoring the scope serves its whole log):
    # its token's own CID claim, as the guard read it
    claimed = read_pulled(last.jws_token)
    return last.cid if claimed is not None and claimed.cid == last.cid else None
