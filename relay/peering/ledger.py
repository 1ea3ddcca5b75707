"""The per-link replication ledger (issue 15, "Per-link replication ledger"):
what this relay, as the consumer, knows of each link (peer, scope, direction).

The peering behaviours report here; the ledger keeps every link's
``LinkRecord`` in memory and writes it through to the store
(``LinkLedgerStore``). The serving relay keeps no per-consumer state.

States (``LinkRecord.state``):
- ``initial``        not caught up yet since start (or since a resume);
- ``live``           caught up, following (live feed, or the configured
                     polling of a sync-only peer) or, out, delivering;
- ``degraded_poll``  a ``live`` peer without a changes feed (v0.7.1), or
                     whose feed stalled before its EOSE: its log is polled
                     instead;
- ``repairing``      a gap is being repaired (feed 410, unknown cursor,
                     ops waiting for a missing dependency, or gossip that
                     gave up on ops: the out-link's watermark is held until
                     a reconciliation with the peer pushed successfully);
- ``paused``         an operator paused the link (``POST /admin/peers/pause``);
                     it survives restarts and only a resume leaves it. Only
                     an operator's write changes whether a stored link is
                     paused, and every process on the store follows such a
                     change at its next flush, so a pause made through one
                     worker holds in all of them.

Writes are throttled so the live path is not slowed by one store write per
batch: a link is written at once when its state, failure count or pause
changes (what an operator must see without delay), and otherwise at most
every ``persist_every_ms`` per link; a flush task writes what is left, and
``stop`` writes everything. A crash loses at most that interval of token
progress, which only makes the ledger look behind (the peer cursors that
resume replication are saved separately, after each commit).

Out-links: each process on a store pushes the ops it ingested itself, so
what it records of an out-link is its own share (``relay.peering.shares``),
written as such (and touched at least every ``MARK_TOUCH_MS``); the link
it shows (``links``) and writes to the shared row is every share merged
(``relay.peering.link_merge``), with the other processes' shares as read
at the last flush. ``get`` is this process's own record. A clean stop
deletes its shares, or leaves behind those that still hold ops back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Protocol

from stores.base import (
    FULL_SCOPE,
    LINK_PENDING_MAX,
    LinkDirection,
    LinkRecord,
    LinkState,
    OutMark,
    PendingOp,
    StoreError,
)

from .link_merge import MARK_TOUCH_MS, merge_out
from .shares import Shares, ShareStore
from .tasks import cancel_all

log = logging.getLogger("dfos_relay.peering")

PERSIST_EVERY_MS = 1_000  # per link, for token progress (state changes are written at once)
ERROR_MAX_CHARS = 300  # last_error is for people; a peer's error text is untrusted
DIRECTIONS: tuple[LinkDirection, ...] = ("in", "out")

Key = tuple[str, str, LinkDirection]


class LedgerStore(ShareStore, Protocol):
    async def get_link(
        self, peer_url: str, scope_id: str, direction: LinkDirection
    ) -> LinkRecord | None: ...
    async def put_link(self, record: LinkRecord, operator: bool = False) -> None: ...
    async def list_links(self) -> list[LinkRecord]: ...
    async def find_buffered(self, cids: Collection[str]) -> dict[str, PendingOp]: ...


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def describe(error: BaseException | str) -> str:
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return text[:ERROR_MAX_CHARS]


class LinkLedger:
    def __init__(
        self,
        clock_ms: Callable[[], int] = wall_ms,
        persist_every_ms: int = PERSIST_EVERY_MS,
        followed: Iterable[str] = (),
        in_scope: str = FULL_SCOPE,
        pulled_elsewhere: Iterable[str] = (),
        shares: Shares | None = None,
    ) -> None:
        self._clock = clock_ms
        self.shares = shares or Shares()
        # run before each flush (``OutLinks.follow_head``)
        self.before_flush: Callable[[], Awaitable[None]] | None = None
        # peers another worker follows or polls: their in-links are that
        # worker's, re-read from the store at every flush (GET /peers)
        self.pulled_elsewhere = frozenset(pulled_elsewhere)
        # in-links pull one scope (a scoped mirror: its scopeId), out-links push everything
        self.in_scope = in_scope
        self._every = persist_every_ms
        self.followed = frozenset(followed)  # live peers: live follow drives their in-link state
        self._store: LedgerStore | None = None
        self._links: dict[Key, LinkRecord] = {}
        self._written: dict[Key, int] = {}
        self._dirty: set[Key] = set()
        self._operator_dirty: set[Key] = set()  # of those, a pause or resume not written
        self._resumed: dict[tuple[str, LinkDirection], asyncio.Event] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._mine: set[Key] = set()  # out-links this process holds a share of

    # lifecycle ---------------------------------------------------------------
    async def start(self, store: LedgerStore) -> None:
        """Load the links the store holds (paused links stay paused)."""
        self._store = store
        for record in await store.list_links():
            self._links[record.key] = record
            self._written[record.key] = record.updated_ms
            if record.state == "paused":
                self._event(record.peer_url, record.direction).clear()
        self.shares.heard(await store.list_out_marks())
        self._flusher = asyncio.create_task(self._flush_forever(), name="link ledger flush")

    async def clear_gone_shares(self) -> None:
        if self._store is None:
            return
        cleared = await self.shares.clear_gone(self._store, self._clock(), self._shares_written)
        # the shared rows of those links are written again without the gone
        # share: one written while it was carried (a write may come between
        # the carry and the delete) still held the link back by it
        for url, scope in cleared:
            key = (url, scope, "out")
            if key in self._links:
                self._dirty.add(key)
        await self.flush()

    async def _shares_written(self) -> bool:
        await self.flush()
        return not self._dirty & self._mine

    async def stop(self) -> None:
        if self._flusher is not None:
            await cancel_all([self._flusher])
            self._flusher = None
        if self._store is not None:
            # the flush task may have been stopped between carrying a gone
            # share and deleting it: deleted once this process's shares (which
            # hold what it carried) are written
            await self.flush()
            if not self._dirty & self._mine:
                await self.shares.delete_carried(self._store)
            # the out-links' shared rows as merged over the shares stored now:
            # it may also have been stopped between deleting one and forgetting it
            with contextlib.suppress(StoreError):
                self.shares.heard(await self._store.list_out_marks())
            self._dirty.update(key for key in self._links if key[2] == "out")
        await self.flush()
        await self._leave_shares()
        self._store = None

    async def _leave_shares(self) -> None:
        if self._store is not None:
            await self.shares.leave(self._store, [self._links[k] for k in sorted(self._mine)])

    # reads -------------------------------------------------------------------
    def clock(self) -> int:
        return self._clock()

    def key(self, url: str, direction: LinkDirection, scope: str | None = None) -> Key:
        if scope is None:
            scope = self.in_scope if direction == "in" else FULL_SCOPE
        return (url, scope, direction)

    def get(self, url: str, direction: LinkDirection, scope: str | None = None) -> LinkRecord:
        key = self.key(url, direction, scope)
        return self._links.get(key) or LinkRecord(*key)

    def links(self) -> list[LinkRecord]:
        """Every link as shown: out-links merged over every process's share."""
        return [self.view(key) for key in sorted(self._links)]

    def view(self, key: Key) -> LinkRecord:
        record = self._links.get(key) or LinkRecord(*key)
        if key[2] != "out":
            return record
        shares = self.shares.others(key[0], key[1])
        return merge_out(record, [record, *shares] if key in self._mine else shares)

    def paused(self, url: str, direction: LinkDirection) -> bool:
        return not self._event(url, direction).is_set()

    async def wait_unpaused(self, url: str, direction: LinkDirection) -> None:
        await self._event(url, direction).wait()

    # writes ------------------------------------------------------------------
    def note(self, url: str, direction: LinkDirection, **changes: Any) -> LinkRecord:
        """Change a link in memory; the flush task writes it (sync callers)."""
        return self._apply(self.key(url, direction, changes.pop("scope", None)), changes)[0]

    async def update(self, url: str, direction: LinkDirection, **changes: Any) -> LinkRecord:
        """Change a link; written at once on a state change, else throttled."""
        key = self.key(url, direction, changes.pop("scope", None))
        record, urgent = self._apply(key, changes)
        if urgent or self._clock() - self._written.get(key, 0) >= self._every:
            await self._write(key)
        return record

    async def set_state(self, url: str, direction: LinkDirection, state: LinkState) -> None:
        """Move a link to ``state``; a paused link stays paused."""
        if not self.paused(url, direction):
            await self.update(url, direction, state=state)

    async def settle(self, url: str) -> None:
        """A sync or reconcile pass caught up: ``initial`` -> ``live``, unless
        live follow drives this peer's in-link state."""
        if url not in self.followed and self.get(url, "in").state == "initial":
            await self.set_state(url, "in", "live")

    async def success(self, url: str, direction: LinkDirection, **changes: Any) -> None:
        now = self._clock()
        await self.update(url, direction, failures=0, last_success_ms=now, last_error=None,
                          **changes)  # fmt: skip

    async def failure(self, url: str, direction: LinkDirection, error: BaseException | str) -> None:
        failures = self.get(url, direction).failures + 1
        await self.update(url, direction, failures=failures, last_failure_ms=self._clock(),
                          last_error=describe(error))  # fmt: skip

    @asynccontextmanager
    async def repairing(self, url: str) -> AsyncIterator[None]:
        """The in-link is ``repairing`` while the block runs; its state before is restored."""
        before = self.get(url, "in").state
        await self.set_state(url, "in", "repairing")
        try:
            yield
        finally:
            if before != "repairing":
                await self.set_state(url, "in", before)

    async def pause(self, url: str, directions: Collection[LinkDirection] = DIRECTIONS) -> None:
        """Written at once; every other process on the store pauses the link
        too, at its next flush (``_hear_operators``)."""
        for direction in directions:
            self._event(url, direction).clear()
            key = self.key(url, direction)
            await self._reread_pulled_elsewhere(key)
            self._apply(key, {"state": "paused"})
            await self._write(key, operator=True)

    async def resume(self, url: str, directions: Collection[LinkDirection] = DIRECTIONS) -> None:
        """A resumed link starts over as ``initial`` (it catches up again)."""
        for direction in directions:
            if self.paused(url, direction):
                key = self.key(url, direction)
                await self._reread_pulled_elsewhere(key)
                self._apply(key, {"state": "initial"}, resume=True)
                await self._write(key, operator=True)
                self._event(url, direction).set()

    async def waiting(self, url: str, waiting: dict[str, str]) -> tuple[dict[str, str], bool]:
        """Of ``waiting`` (cid -> feed token of ops received from ``url`` that
        wait for a dependency), those still waiting; records what they miss
        in the in-link's diagnostics. Returns them and whether any changed."""
        if not waiting or self._store is None:
            return waiting, False
        try:
            buffered = await self._store.find_buffered(list(waiting))
        except StoreError as exc:
            log.warning("link ledger: cannot read the buffer: %s", exc)
            return waiting, False
        still = {cid: token for cid, token in waiting.items() if cid in buffered}
        missing: dict[str, list[str]] = {"identity": [], "operation": []}
        for op in buffered.values():
            kind, _, ident = op.waits_for.partition(":")
            if kind in ("did", "op") and ident:
                missing["identity" if kind == "did" else "operation"].append(ident)
        diagnostics = dict(self.get(url, "in").diagnostics)
        if still:
            bounded = dict(list(still.items())[:LINK_PENDING_MAX])
            named = {k: sorted(set(v)) for k, v in missing.items() if v}
            diagnostics.update(waiting=bounded, missing=named)
        else:
            diagnostics.pop("waiting", None)
            diagnostics.pop("missing", None)
        self.note(url, "in", diagnostics=diagnostics)
        return still, len(still) != len(waiting)

    async def flush(self) -> None:
        for key in sorted(self._dirty):
            await self._write(key)

    # internals -----------------------------------------------------------------
    def _event(self, url: str, direction: LinkDirection) -> asyncio.Event:
        event = self._resumed.get((url, direction))
        if event is None:
            event = self._resumed[(url, direction)] = asyncio.Event()
            event.set()
        return event

    def _apply(
        self, key: Key, changes: dict[str, Any], resume: bool = False
    ) -> tuple[LinkRecord, bool]:
        old = self._links.get(key) or LinkRecord(*key)
        if old.state == "paused" and not resume:
            changes.pop("state", None)  # only a resume leaves ``paused``
        new = replace(old, **changes, updated_ms=self._clock())
        if key[2] == "out" and "applied_token" in changes:
            self._mine.add(key)  # only the out-links' watermark (``OutLinks``) sets it
        if new.state != old.state:
            log.info("peer %s: %s-link %s: %s -> %s", key[0], key[2], key[1], old.state, new.state)
        self._links[key] = new
        self._dirty.add(key)
        urgent = (new.state, new.failures) != (old.state, old.failures) or key not in self._written
        return new, urgent

    async def _write(self, key: Key, operator: bool = False) -> None:
        store = self._store
        if store is None:
            return
        operator = operator or key in self._operator_dirty
        self._dirty.discard(key)
        self._operator_dirty.discard(key)
        self._written[key] = self._clock()
        try:
            if key in self._mine:
                await store.put_out_mark(OutMark(self.shares.writer, self._links[key]))
            shown = self.view(key) if key[2] == "out" else self._links[key]
            await store.put_link(shown, operator=operator)
        except StoreError as exc:  # the ledger must never stop replication
            self._dirty.add(key)
            if operator:  # retried by the flush task as what it is
                self._operator_dirty.add(key)
            log.warning("link ledger: cannot write %s: %s", key, exc)

    async def _reread_pulled_elsewhere(self, key: Key) -> None:
        """An operator's write is of the whole link: for an in-link another
        process pulls, write that process's progress as the store has it, not
        this process's copy of it (re-read at each flush, so up to one
        interval old). A failed read leaves the copy: the puller's next
        write carries its progress again."""
        url, scope, direction = key
        if direction != "in" or url not in self.pulled_elsewhere or self._store is None:
            return
        try:
            stored = await self._store.get_link(url, scope, direction)
        except StoreError as exc:
            log.warning("link ledger: cannot read %s: %s", key, exc)
            return
        if stored is not None:
            self._links[key] = stored

    def _touch_shares(self) -> None:
        """A share not written for ``MARK_TOUCH_MS`` is written again: an
        idle process is not taken for gone."""
        now = self._clock()
        for key in self._mine:
            if now - self._written.get(key, 0) >= MARK_TOUCH_MS:
                self._apply(key, {})

    def _hear_operators(self, records: list[LinkRecord]) -> None:
        """Pauses and resumes an operator made through another process on the
        store (its workers, other hosts on one Postgres): this one follows."""
        for stored in records:
            key = stored.key
            if key in self._operator_dirty:
                continue  # this process's own pause or resume is not written yet
            local = self._links.get(key)
            if (stored.state == "paused") == (local is not None and local.state == "paused"):
                continue
            url, _, direction = key
            self._links[key] = stored if local is None else replace(local, state=stored.state)
            paused = self._event(url, direction)
            paused.clear() if stored.state == "paused" else paused.set()
            change = "paused" if stored.state == "paused" else "resumed"
            log.info("peer %s: %s-link %s by an operator elsewhere", url, direction, change)

    async def take_in_links(self, urls: Iterable[str]) -> None:
        """This process pulls from ``urls`` now: their in-links are read once
        more (as the last process that pulled left them), then written here."""
        if self._store is not None:
            self._reload_in_links(await self._store.list_links())
        self.pulled_elsewhere = self.pulled_elsewhere.difference(urls)

    async def leave_in_links(self, urls: Iterable[str]) -> None:
        """Another process pulls from ``urls`` now: what this one last knew
        of their in-links is written out, then they are read from the store."""
        await self.flush()
        self.pulled_elsewhere = self.pulled_elsewhere.union(urls)

    def _reload_in_links(self, records: list[LinkRecord]) -> None:
        for record in records:
            if record.direction == "in" and record.peer_url in self.pulled_elsewhere:
                self._links[record.key] = record
                self._written[record.key] = record.updated_ms
                paused = self._event(record.peer_url, "in")  # as the pulling process set it
                paused.clear() if record.state == "paused" else paused.set()

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self._every / 1000)
            try:
                if self.before_flush is not None:
                    await self.before_flush()
                self._touch_shares()
                await self.flush()
                if self._store is None:
                    continue
                records = await self._store.list_links()  # one read for both
                self._reload_in_links(records)
                self._hear_operators(records)
                self.shares.heard(await self._store.list_out_marks())
                await self.clear_gone_shares()
            except Exception:  # a failed flush must not end the loop silently
                log.exception("link ledger flush failed")
