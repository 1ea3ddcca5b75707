"""Sync-echo suppression (issue 15, "Per-link replication ledger": an op a
peer sent us is never pushed back to it).

``EchoMemory`` remembers, per peer URL, the CIDs of the ops that peer sent
us by any path (a push to our POST /operations, live follow, sync-in, a
reconcile pull). Gossip lanes consult it when they send a batch, and a
reconcile push consults it before pushing, so an op does not return to a
peer that has it. Pending ops count too: an op that waited for a dependency
and is sequenced later, in another peer's batch, still does not go back.

Bounded: at most ``per_peer`` CIDs per peer, oldest forgotten first (an
insertion-ordered dict used as an LRU), so the memory costs at most
peers x per_peer CIDs. Forgetting is harmless: a forgotten op may echo once
and the peer answers ``duplicate``. Not checked: that the CIDs are real;
this is only an optimisation of what is pushed, never a trust decision.
"""

from __future__ import annotations

from collections.abc import Iterable

from .config import ECHO_MEMORY_PER_PEER  # CIDs per peer (a CID is ~60 bytes)


class EchoMemory:
    def __init__(self, per_peer: int = ECHO_MEMORY_PER_PEER) -> None:
        if per_peer < 1:
            raise ValueError("echo memory must hold at least one CID per peer")
        self.per_peer = per_peer
        self._seen: dict[str, dict[str, None]] = {}

    def note(self, peer_url: str, cids: Iterable[str]) -> None:
        """``peer_url`` sent us these ops (or showed it has them)."""
        seen = self._seen.setdefault(peer_url, {})
        for cid in cids:
            seen.pop(cid, None)  # refresh: move to the newest end
            seen[cid] = None
        while len(seen) > self.per_peer:
            del seen[next(iter(seen))]

    def sent_us(self, peer_url: str, cid: str) -> bool:
        seen = self._seen.get(peer_url)
        return seen is not None and cid in seen

    def size(self, peer_url: str) -> int:
        return len(self._seen.get(peer_url, ()))
