"""A scope applied to a stream in log order (the changes feed's tail, a
scoped ``/log`` page): which entries pass, and the closure ops that must be
sent first.

Dependencies are always sequenced before their dependants, so in log order
a scoped op's closure is normally behind it already. The exception is a
closure that grows: a content op signed by an identity the scope did not
need until then. Its identity chain was skipped as out of scope; the
tracker reads that chain up to the dependant and sends it first, marked
``late``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from stores.base import FeedEntry, OperationKind

from .closure import EffectiveScope, ScopeReader, dependencies

_IDENTITY: tuple[OperationKind, ...] = ("identity-op",)


@dataclass(frozen=True, slots=True)
class Admitted:
    entry: FeedEntry
    late: bool = False  # a closure op sent ahead of its dependant, behind its own seq


class ScopeTracker:
    def __init__(self, reader: ScopeReader, effective: EffectiveScope) -> None:
        self._reader = reader
        self.effective = effective

    async def admit(self, entries: Iterable[FeedEntry]) -> list[Admitted]:
        """The in-scope entries among ``entries`` (seq order), each preceded
        by the closure ops it newly brings in."""
        eff = self.effective
        out: list[Admitted] = []
        for entry in entries:
            if not eff.contains(entry.kind, entry.chain_id):
                continue
            for did in sorted(dependencies(entry) - eff.identities):
                eff.identities.add(did)
                chain = await self._reader.read_chain_entries(did, _IDENTITY, entry.seq - 1)
                if not chain:
                    eff.note_missing("identity", did)
                out.extend(Admitted(op, late=True) for op in chain)
            if eff.is_intent(entry.kind, entry.chain_id):
                eff.targets.add(entry.cid)  # its countersignatures are in scope too
            out.append(Admitted(entry))
        return out
