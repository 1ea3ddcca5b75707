"""What each peer answered our reconcile pushes with, remembered per peer
for a while and in bounded number (``CidsAtPeers``).

**Parked** (``ParkedAtPeers``): ops it took and keeps in its pending
buffer, waiting for a dependency (``rejected`` with a missing-* reason,
``RejectReason.is_dependency``). A peer's item set is its log, so an op it
parks is named as lacking by every run until it sequences, and was pushed
again by every run: a post, and the peer's verification of it, each time,
with nothing gained. The peer wakes a parked op itself when the dependency
lands, whoever brings it (our run pushing it, gossip, another peer), so
the op need not come again; it is held back while remembered. A peer
answering ``new`` or ``duplicate`` for an id is forgotten for it. A peer
that says it parks everything is pushed nothing for the TTL, which costs
us nothing.

Memory is bounded: a TTL per id (then it is pushed again once: the peer's
buffer or store may have lost it) and a number of ids per peer (the oldest
forgotten first, and pushed again). What a peer says is its word only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

PARKED_TTL_S = 3600.0  # over the periodic run interval (300 s) many times
PARKED_PER_PEER = 50_000  # ids (CID strings: some 10 MB at most per peer)

Clock = Callable[[], float]


class CidsAtPeers:
    """Per peer URL: CIDs, each with when it is forgotten."""

    def __init__(self, ttl_s: float, per_peer: int, clock: Clock = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._per_peer = per_peer
        self._clock = clock
        self._peers: dict[str, OrderedDict[str, float]] = {}

    def holds(self, peer: str, cid: str) -> bool:
        """``cid`` is remembered for ``peer`` (an expired entry is dropped)."""
        held = self._peers.get(peer)
        until = None if held is None else held.get(cid)
        if held is None or until is None:
            return False
        if until <= self._clock():
            del held[cid]
            return False
        return True

    def remember(self, peer: str, cids: Iterable[str]) -> None:
        held = self._peers.setdefault(peer, OrderedDict())
        now = self._clock()
        for cid in cids:
            held.pop(cid, None)  # kept in order of expiry: re-remembered goes last
            held[cid] = now + self._ttl_s
        while held and (len(held) > self._per_peer or next(iter(held.values())) <= now):
            held.popitem(last=False)
        if not held:
            del self._peers[peer]

    def forget(self, peer: str, cids: Iterable[str]) -> None:
        held = self._peers.get(peer)
        if held is None:
            return
        for cid in cids:
            held.pop(cid, None)
        if not held:
            del self._peers[peer]

    def count(self, peer: str) -> int:
        return len(self._peers.get(peer, ()))


class ParkedAtPeers(CidsAtPeers):
    """The CIDs each peer parked when pushed: held back from later runs."""

    def __init__(
        self,
        ttl_s: float = PARKED_TTL_S,
        per_peer: int = PARKED_PER_PEER,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(ttl_s, per_peer, clock)

    parked = CidsAtPeers.holds

