"""A scoped mirror's in-links ingest their scope only (``relay.scope.guard``).

Every path that pulls a scope from a peer (scoped ``/log`` pages, the
scoped feed, a scoped reconciliation) hands what the peer served to one
``ScopeGuard``, shared so that a closure op pulled by one path finds what
another kept waiting for it. What the peer served outside the scope is not
ingested: it is counted (``dfos_relay_scope_out_of_scope_total{peer}``),
logged once per page or batch, and named in the in-link's diagnostics
(``outOfScope``: how many ops this process left out, the last few CIDs).
It is not a failure of the link: what the peer served in scope still
counts. A peer that serves everything (one that ignores ``scope``) sends a
closure identity in log order, maybe pages before the op that needs it;
that page leaves it out, and a scoped reconciliation brings it once the
op waits for it.

After a restart the guard's memory of ops waiting in the pending buffer is
gone; the in-link's diagnostics still name the identities they wait for
(``missing``), and those stay in the closure (``owed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relay.rules.outcomes import IngestionResult
from relay.scope import Pulled, Scope, ScopeGuard

from .host import PeeringHost
from .ledger import LinkLedger

OUT_OF_SCOPE = "outOfScope"  # in-link diagnostics: what the peer served outside the scope
SAMPLE = 5


class ScopeCheck:
    def __init__(self, scope: Scope | None) -> None:
        self._scope = scope
        self.ledger = LinkLedger()  # the peering service shares its own
        self.guard: ScopeGuard | None = None
        self._metrics: Any = None

    def start(self, host: PeeringHost) -> None:
        """After the ledger loaded: what its in-links' ops wait for is owed."""
        if self._scope is not None and self.guard is None:
            self.guard = ScopeGuard(host.store, self._scope, self._left_out)
        if self.guard is not None:
            self.guard.owe(self._owed())
        self._metrics = getattr(host, "metrics", None)

    async def ingest(
        self, host: PeeringHost, url: str, tokens: Sequence[object]
    ) -> tuple[list[int], list[IngestionResult]]:
        """Of ``tokens`` (served by ``url``), those the scope holds ingested:
        (their indexes in ``tokens``, their results in that order)."""
        guard = self.guard
        if guard is None:
            return list(range(len(tokens))), await host.ingest(tokens, source=url)
        split = await guard.split(tokens)
        guard.left_out(url, split.outside)
        results = await host.ingest(split.kept, source=url) if split.kept else []
        guard.settle(split.kept_ops, results)
        return split.kept_at, results

    def _owed(self) -> set[str]:
        """The identities ops pulled for the scope wait for (the in-links' diagnostics)."""
        owed: set[str] = set()
        for link in self.ledger.links():
            if link.direction != "in" or link.scope_id != self.ledger.in_scope:
                continue
            missing = link.diagnostics.get("missing")
            named = missing.get("identity") if isinstance(missing, dict) else None
            if isinstance(named, list):
                owed.update(did for did in named if isinstance(did, str))
        return owed

    def _left_out(self, url: str, outside: Sequence[Pulled]) -> None:
        if self._metrics is not None:
            self._metrics.scope_out_of_scope(url, len(outside))
        diagnostics = dict(self.ledger.get(url, "in").diagnostics)
        before = diagnostics.get(OUT_OF_SCOPE)
        count = before.get("ops") if isinstance(before, dict) else None
        total = (count if isinstance(count, int) else 0) + len(outside)
        diagnostics[OUT_OF_SCOPE] = {"ops": total, "last": [op.cid for op in outside[-SAMPLE:]]}
        self.ledger.note(url, "in", diagnostics=diagnostics)
