"""Where scoped ``/log`` pages left their closure, so the next page goes on
from there instead of computing the closure again from the log's start.

A page's closure at a position is a function of the log up to it (and of
the feed epoch: a purge changes both), so a checkpoint is the state a
page reached (the closure identities and those found missing), keyed by
(epoch, scopeId, seq). The next page resumes at its exact cursor, or
catches up from an earlier checkpoint over a short stretch of the log (a
page served by another worker); otherwise it computes the closure afresh,
as every page did before. Bounded: a few checkpoints per scope, a few
scopes, and a ceiling on the identities they hold together.

Countersignature targets are not kept: the page looks each target up
(``targets_before``), so a checkpoint is as small as the closure's
identities, not as the scope's ops.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from stores.base import FeedEntry, OperationRecord

from .closure import EffectiveScope

SCOPES = 64
PER_SCOPE = 4
MAX_IDENTITIES = 200_000  # DIDs held by all checkpoints together


@dataclass(frozen=True, slots=True)
class Checkpoint:
    seq: int
    identities: frozenset[str]
    missing: frozenset[str]  # closure identities this relay does not hold

    @classmethod
    def of(cls, seq: int, eff: EffectiveScope) -> Checkpoint:
        return cls(seq, frozenset(eff.identities), frozenset(eff.missing.get("identity", ())))

    def resume(self, eff: EffectiveScope) -> None:
        eff.identities |= self.identities
        for did in self.missing:
            eff.note_missing("identity", did)


class ClosureCheckpoints:
    def __init__(
        self, scopes: int = SCOPES, per_scope: int = PER_SCOPE, max_identities: int = MAX_IDENTITIES
    ) -> None:
        self._scopes = scopes
        self._per_scope = per_scope
        self._max_identities = max_identities
        self._held = 0
        self._by_scope: OrderedDict[tuple[str, str], list[Checkpoint]] = OrderedDict()

    def nearest(self, epoch: str, scope_id: str, seq: int) -> Checkpoint | None:
        """The latest checkpoint at or before ``seq``."""
        kept = self._by_scope.get((epoch, scope_id), [])
        before = [c for c in kept if c.seq <= seq]
        return max(before, key=lambda c: c.seq) if before else None

    def keep(self, epoch: str, scope_id: str, checkpoint: Checkpoint) -> None:
        if len(checkpoint.identities) > self._max_identities:
            return
        key = (epoch, scope_id)
        kept = self._by_scope.pop(key, [])
        self._by_scope[key] = kept  # most recently used last
        if any(c.seq == checkpoint.seq for c in kept):
            return
        kept.append(checkpoint)
        self._held += len(checkpoint.identities)
        if len(kept) > self._per_scope:
            self._held -= len(kept.pop(0).identities)
        while self._by_scope and (
            len(self._by_scope) > self._scopes or self._held > self._max_identities
        ):
            _, dropped = self._by_scope.popitem(last=False)
            self._held -= sum(len(c.identities) for c in dropped)


class TargetReader(Protocol):
    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]: ...


async def targets_before(reader: TargetReader, eff: EffectiveScope, batch: list[FeedEntry]) -> None:
    """Add to ``eff.targets`` the intent ops that ``batch``'s countersignatures
    target, where the target comes before its countersignature: exactly the
    targets a scan of the whole log in order would hold by then."""
    first: dict[str, int] = {}  # target CID -> seq of its first countersignature here
    for entry in batch:
        if entry.kind == "countersign" and entry.chain_id not in eff.targets:
            first.setdefault(entry.chain_id, entry.seq)
    if not first:
        return
    for cid, op in (await reader.read_operations(first)).items():
        # a target after its countersignature is not in (the ingest never logs one)
        if op.seq < first[cid] and eff.is_intent(op.kind, op.chain_id):
            eff.targets.add(cid)
