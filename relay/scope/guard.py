"""The consumer's side of a scope: which of the ops a peer serves for our
scope (scoped ``/log`` pages, a scoped feed, a scoped reconciliation)
belong to it, so that a scoped mirror ingests its scope and closure only,
not whatever valid ops a hostile or buggy peer puts in its pages.

An op is kept when ``EffectiveScope`` (``closure``), the serving side's own
rules, holds it: an op of the intent (a DID's identity chain, beacons and
artifacts; a contentId's chain), a countersignature of an intent op, or an
identity op of a DID the closure needs (an intent op's or
countersignature's ``dependencies``). The effective scope is ours: computed
over our store, grown by what this guard kept since (also ops that wait in
the pending buffer), and by the batch itself.

Cost: a batch with an op the effective scope does not hold (what a hostile
peer can send page after page) has it brought forward over what our log
committed since it was last (``closure.bring_forward``), not computed over
the whole scope again: the cost of a batch is the batch's and the new
commits', once each. It is computed afresh only at first and when the log
may have been renumbered (its epoch changed: a purge, a reset; or it got
shorter), and keeps what it held (ops kept waiting stay in).

Order: the serving side sends a closure op only once something needs it,
in the same page or feed batch as that dependant (``tracker``: a late
closure op comes just before it), so a batch is judged as a whole: a
closure identity op ahead of its dependant in the batch is kept. A
reconciliation fetches in batches that may split the two; its caller
``recheck``s what was left out once the run has seen every batch.

The claims judged (kind, chain, signer, a content op's parent) are read
from the token unverified (``relay.rules.claims``): ingest verifies every
kept op, and each claim used here is one the verifier holds the op to.
What is not checked: a forged op that claims to be in scope can bring the
identity chains it names along in its own batch; it does not verify, and
a peer serving it is rejected for it by the caller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from relay.loop_slices import Slices
from relay.protocol import ProtocolError, decode_jws
from relay.rules.claims import claimed_chain
from relay.rules.classify import classify
from relay.rules.outcomes import IngestionResult
from stores.base import FeedEntry, OperationKind

from .closure import (
    EffectiveScope,
    PagedScopeReader,
    bring_forward,
    dependencies,
    effective_scope_in_pages,
)
from .model import Scope

log = logging.getLogger("dfos_relay.scope")

SAMPLE = 5  # CIDs of left-out ops a log line names
FORWARD_PAGE = 1000  # log entries read at a time when the closure is brought forward


class GuardReader(PagedScopeReader, Protocol):
    async def log_length(self) -> int: ...

    async def get_feed_epoch(self) -> str: ...

    async def read_seq_range(
        self, after_seq: int, until_seq: int, limit: int
    ) -> list[FeedEntry]: ...


@dataclass(frozen=True, slots=True)
class Pulled:
    """What a served token claims to be (unverified)."""

    token: str
    cid: str
    kind: OperationKind
    chain_id: str | None  # None: a content extension, on its parent's chain
    previous: str | None
    needs: frozenset[str]  # the identities it needs in the closure (``dependencies``)


def read_pulled(token: str) -> Pulled | None:
    """``token``'s claims; None when it cannot be read (ingest rejects it)."""
    try:
        decoded = decode_jws(token)
    except ProtocolError:
        return None
    kind = classify(decoded.typ)
    cid = decoded.header_cid
    payload = decoded.payload
    if kind is None or not isinstance(cid, str):
        return None
    previous = payload.get("previousOperationCID")
    previous = previous if isinstance(previous, str) else None
    author = payload.get("did")
    chain_id = claimed_chain(kind, cid, payload, decoded.kid)
    if chain_id is None and (kind != "content-op" or previous is None):
        return None  # only a content extension names no chain (its parent's)
    op_kind = cast(OperationKind, kind)
    entry = FeedEntry(0, cid, token, op_kind, chain_id or "", str(author), 0)
    needs = dependencies(entry) if isinstance(author, str) else set()
    return Pulled(token, cid, op_kind, chain_id, previous, frozenset(needs))


@dataclass(slots=True)
class GuardSplit:
    kept: list[str] = field(default_factory=list)  # tokens, in the order served
    kept_at: list[int] = field(default_factory=list)  # their indexes in the batch
    kept_ops: list[Pulled] = field(default_factory=list)  # those of them that could be read
    outside: list[Pulled] = field(default_factory=list)


class ScopeGuard:
    """One scope's guard, shared by every path that pulls it (so a closure
    op finds what an earlier page or run kept waiting for it)."""

    def __init__(
        self,
        reader: GuardReader,
        scope: Scope,
        on_outside: Callable[[str, Sequence[Pulled]], None] | None = None,
    ) -> None:
        self._reader = reader
        self.scope = scope
        self._eff: EffectiveScope | None = None
        self._seq = 0  # the log position ``_eff`` is brought forward to
        self._epoch: str | None = None  # the log's epoch at that position
        self._owed: set[str] = set()
        self.on_outside = on_outside
        self.rebuilds = 0  # closures computed over the whole scope
        self._refreshing = asyncio.Lock()  # one refresh at a time: it pauses between pages

    def owe(self, dids: Collection[str]) -> None:
        """Identities that ops pulled before wait for in the pending buffer
        (named by the ledger after a restart): the closure needs them."""
        self._owed.update(dids)
        if self._eff is not None:
            self._eff.identities |= self._owed

    async def split(self, tokens: Sequence[object]) -> GuardSplit:
        """``tokens`` split into those of the scope (or not readable: ingest
        answers those) and the ops outside it."""
        pulled = [read_pulled(t) if isinstance(t, str) else None for t in tokens]
        eff = await self._effective()
        decided = _judge(eff, pulled)
        if not all(decided):  # our store may hold more since (another path, a client)
            eff = await self._effective(refresh=True)
            decided = _judge(eff, pulled)
        out = GuardSplit()
        for at, (token, op, keep) in enumerate(zip(tokens, pulled, decided, strict=True)):
            if keep:
                out.kept.append(token)  # type: ignore[arg-type]
                out.kept_at.append(at)
                if op is not None:
                    out.kept_ops.append(op)
            elif op is not None:
                out.outside.append(op)
        return out

    async def recheck(self, outside: Sequence[Pulled]) -> list[Pulled]:
        """Of ``outside`` (left out of earlier batches), those the effective
        scope holds now: a reconciliation's batches may bring a closure op
        before the op that needs it."""
        eff = await self._effective()
        decided = _judge(eff, list(outside))
        return [op for op, keep in zip(outside, decided, strict=True) if keep]

    def settle(self, kept: Sequence[Pulled], results: Sequence[IngestionResult]) -> None:
        """Grow the effective scope by the kept ops ingest took (sequenced,
        held already, or waiting for a dependency: their closure is owed)."""
        if self._eff is None:
            return
        taken = {r.cid for r in results if r.reason is None or not r.reason.is_permanent}
        for op in kept:
            if op.cid in taken:
                _grow(self._eff, op)

    def left_out(self, peer: str, outside: Sequence[Pulled]) -> None:
        """Say once that ``outside`` (from ``peer``) was not ingested."""
        if not outside:
            return
        sample = ", ".join(op.cid for op in outside[:SAMPLE])
        more = ", ..." if len(outside) > SAMPLE else ""
        log.warning(
            "peer %s served %d ops outside scope %s; not ingested (%s%s)",
            peer, len(outside), self.scope.scope_id, sample, more,
        )  # fmt: skip
        if self.on_outside is not None:
            self.on_outside(peer, outside)

    async def _effective(self, refresh: bool = False) -> EffectiveScope:
        """The effective scope; ``refresh``: brought forward over what our
        log committed since, at the cost of that (a batch with an op outside
        the scope must not cost the whole scope: a hostile peer sends many).
        Computed afresh only at first, and after a purge or a reset of the
        log (its epoch changed or it got shorter), which may renumber it.
        Either way a page of reads at a time, the loop let go between them
        (a large scope's closure, or a long stretch of the log, is seconds)."""
        if self._eff is not None and not refresh:
            return self._eff
        async with self._refreshing:
            if self._eff is not None and not refresh:  # computed while this call waited
                return self._eff
            return await self._refresh()

    async def _refresh(self) -> EffectiveScope:
        slices = Slices()
        epoch = await self._reader.get_feed_epoch()  # read first: a later purge shows next time
        head = await self._reader.log_length()
        if self._eff is None or epoch != self._epoch or head < self._seq:
            return await self._rebuild(epoch, head, slices)
        while self._seq < head:
            page = await self._reader.read_seq_range(self._seq, head, FORWARD_PAGE)
            if not page:
                break  # the rest was purged: the next refresh sees the new epoch
            bring_forward(self._eff, page)
            self._seq = page[-1].seq
            await slices.pause_when_due()
        self._seq = max(self._seq, head)
        return self._eff

    async def _rebuild(self, epoch: str, head: int, slices: Slices) -> EffectiveScope:
        fresh = await effective_scope_in_pages(
            self._reader, self.scope, head, slices.pause_when_due
        )
        self.rebuilds += 1
        fresh.identities |= self._owed
        if self._eff is not None:  # what was kept waiting stays in
            fresh.identities |= self._eff.identities
            fresh.targets |= self._eff.targets
        self._eff, self._seq, self._epoch = fresh, head, epoch
        return fresh


def _judge(eff: EffectiveScope, pulled: Sequence[Pulled | None]) -> list[bool]:
    """Which of ``pulled`` the scope holds, the batch taken as a whole:
    intent ops (a content extension by its parent, which may come earlier
    in the batch), then countersignatures of intent ops, then identity ops
    of the closure that the batch's kept ops grow."""
    keep = [op is None for op in pulled]  # unreadable: ingest rejects it
    intent: set[str] = set()
    needed: set[str] = set()
    for i, op in enumerate(pulled):
        if op is not None and _is_intent(eff, op, intent):
            keep[i] = True
            intent.add(op.cid)
            needed |= op.needs
    for i, op in enumerate(pulled):
        if op is None or op.kind != "countersign":
            continue
        if op.chain_id in eff.targets or op.chain_id in intent:
            keep[i] = True
            needed |= op.needs
    for i, op in enumerate(pulled):
        if op is not None and op.kind == "identity-op" and not keep[i]:
            keep[i] = op.chain_id in eff.identities or op.chain_id in needed
    return keep


def _is_intent(eff: EffectiveScope, op: Pulled, intent: Collection[str]) -> bool:
    if op.chain_id is None:  # a content extension: its parent's chain
        return op.previous is not None and (op.previous in eff.targets or op.previous in intent)
    return eff.is_intent(op.kind, op.chain_id)


def _grow(eff: EffectiveScope, op: Pulled) -> None:
    """``op``, kept and taken, in the effective scope (as ``tracker`` does)."""
    if _is_intent(eff, op, ()):
        eff.targets.add(op.cid)
        eff.identities |= op.needs
    elif op.kind == "countersign" and op.chain_id in eff.targets:
        eff.identities |= op.needs
