"""This process's shares of out-links and the other processes' ones
(``stores.base.OutMark``; how they merge: ``relay.peering.link_merge``).

The ledger writes this process's share of each out-link it pushes on, under
its ``writer`` id (random at start: a restarted process is another writer),
and reads every share back at each flush. A share whose writer is gone (not
written for ``MARK_STALE_MS``, or left behind by a clean stop) is carried by
a live process that sees it (``on_gone``: what it held back becomes a floor
of that process's own share), and only then deleted, once that share is
written: a reader of the shares never finds neither. Two processes may
carry one gone share (that only holds the link until both repaired); the
delete is of the share as read (its ``updated_ms``), so a writer that was
only slow keeps what it wrote since.

Shares only move up (a floor carried from a gone share is below it), so a
process that read another's share a flush ago reads a bound, not a claim.
What it has not read at all is a process started since its last flush:
for up to a flush, its merged link does not count that process's first ops.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Protocol

from stores.base import LinkRecord, OutMark, StoreError

from .link_merge import MARK_STALE_MS, is_gone

log = logging.getLogger("dfos_relay.peering")

GoneShare = Callable[[LinkRecord], Awaitable[None]]


class ShareStore(Protocol):
    async def put_out_mark(self, mark: OutMark) -> None: ...
    async def list_out_marks(self) -> list[OutMark]: ...
    async def delete_out_mark(
        self, writer: str, peer_url: str, scope_id: str, updated_ms: int | None = None
    ) -> bool: ...


def new_writer() -> str:
    return secrets.token_hex(8)


class Shares:
    def __init__(self, writer: str | None = None, stale_ms: int = MARK_STALE_MS) -> None:
        self.writer = writer or new_writer()
        self.stale_ms = stale_ms
        self._others: dict[tuple[str, str], list[OutMark]] = {}  # as last read
        # gone shares carried and not deleted yet (writer, url, scope, updated_ms):
        # not carried again (that would take back what a repair since pushed)
        self._carried: set[tuple[str, str, str, int]] = set()
        self.on_gone: GoneShare | None = None  # takes over what a gone share held back

    def heard(self, marks: Iterable[OutMark]) -> None:
        others: dict[tuple[str, str], list[OutMark]] = {}
        for mark in marks:
            if mark.writer != self.writer:
                others.setdefault((mark.record.peer_url, mark.record.scope_id), []).append(mark)
        self._others = others

    def others(self, url: str, scope: str) -> list[LinkRecord]:
        """The other writers' shares of a link, gone ones included (they hold
        it back until cleared)."""
        return [m.record for m in self._others.get((url, scope), ())]

    async def clear_gone(
        self, store: ShareStore, now_ms: int, written: Callable[[], Awaitable[bool]]
    ) -> set[tuple[str, str]]:
        """Carry, then delete, every gone share; ``written`` writes this
        process's shares (carrying one changed them): False, not written.
        Returns the links (url, scope) that lost a share: a merge written
        meanwhile still counted it."""
        cleared: set[tuple[str, str]] = set()
        for key, marks in list(self._others.items()):
            for mark in [m for m in marks if is_gone(m.record, now_ms, self.stale_ms)]:
                url, scope = key
                carried = (mark.writer, url, scope, mark.record.updated_ms)
                if self.on_gone is not None:
                    if carried not in self._carried:
                        await self.on_gone(mark.record)
                        self._carried.add(carried)
                    if not await written():
                        continue  # carried, not written yet: deleted at a later flush
                try:
                    await store.delete_out_mark(mark.writer, url, scope, mark.record.updated_ms)
                except StoreError as exc:  # carried already; deleted at a later flush
                    log.warning("link ledger: cannot clear a gone share of %s: %s", url, exc)
                    continue
                self._carried.discard(carried)
                marks.remove(mark)
                cleared.add(key)
                log.info("peer %s: out-link %s: carried the share of gone writer %s "
                         "(watermark %s)", url, scope, mark.writer,
                         mark.record.applied_token)  # fmt: skip
        return cleared

    async def delete_carried(self, store: ShareStore) -> None:
        """At a stop, once this process's shares are written: the gone shares
        it carried and had not deleted yet (the flush task was stopped in
        between) are deleted, so that no process carries them again."""
        for writer, url, scope, updated_ms in sorted(self._carried):
            try:
                await store.delete_out_mark(writer, url, scope, updated_ms)
            except StoreError as exc:  # left: the next process carries it again
                log.warning("link ledger: cannot clear a gone share of %s: %s", url, exc)
                continue
            self._carried.discard((writer, url, scope, updated_ms))

    async def leave(self, store: ShareStore, own: Iterable[LinkRecord]) -> None:
        """At a clean stop: a share that holds nothing back is deleted; one
        that does (ops lost, or queued still) is left behind (``updated_ms``
        0) for the next process to carry."""
        for record in own:
            held = record.applied_token != record.received_token or record.state == "repairing"
            try:
                if held:
                    await store.put_out_mark(OutMark(self.writer, replace(record, updated_ms=0)))
                else:
                    await store.delete_out_mark(self.writer, record.peer_url, record.scope_id)
            except StoreError as exc:  # left as last written: it goes stale, then is carried
                log.warning("link ledger: cannot leave the share of %s: %s", record.peer_url, exc)
