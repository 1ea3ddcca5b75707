"""Rejection notes: every rejection the pipeline decides, remembered by CID
so ``GET /operations/{cid}/status`` can explain it, and counted by reason.

A note is written after the session that decided it has committed, before
the request is answered, so a client that reads the status of a rejected op
right after its answer finds the note. The store keeps the most recent
``keep`` notes (a bounded memory of *recent* rejections, not an archive).

What is counted but not noted: a token without a derivable CID (nothing to
look it up by), and a token refused again because its earlier permanent
rejection is on record (its first note, with the original reason, stays).
Ops that only miss a dependency are not rejections here: they wait in the
buffer, and their status says what for.

A failure to write notes is logged and swallowed: the ops they explain are
already committed or refused, and the answer must not turn into a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from relay.rules.outcomes import RejectReason
from stores.base import RejectionNote, StatusStore, StoreError

log = logging.getLogger("dfos_relay.ingest")

RejectionListener = Callable[[Sequence[RejectReason]], None]


@dataclass(frozen=True, slots=True)
class RejectionEvent:
    reason: RejectReason
    note: RejectionNote | None  # None: counted, not remembered


def rejection_event(
    cid: str, reason: RejectReason, detail: str, at_ms: int, token_hash: str, *, remember: bool
) -> RejectionEvent:
    if not cid or not remember:
        return RejectionEvent(reason, None)
    return RejectionEvent(reason, RejectionNote(cid, reason.value, detail, at_ms, token_hash))


class RejectionNotes:
    """Writes notes to the store and tells listeners (metrics) the reasons."""

    def __init__(self, store: StatusStore, keep: int) -> None:
        self._store = store
        self._keep = keep
        self._listeners: list[RejectionListener] = []

    def add_listener(self, listener: RejectionListener) -> None:
        self._listeners.append(listener)

    async def record(self, events: Sequence[RejectionEvent]) -> None:
        if not events:
            return
        reasons = [event.reason for event in events]
        for listener in self._listeners:
            listener(reasons)
        notes = [event.note for event in events if event.note is not None]
        if not notes or self._keep <= 0:
            return
        try:
            await self._store.record_rejection_notes(notes, self._keep)
        except StoreError as exc:
            log.warning("could not record %d rejection notes: %s", len(notes), exc)
