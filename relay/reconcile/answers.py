"""What each peer answered our reconcile pushes with, remembered per peer
for a while and in bounded number (``CidsAtPeers``), for two uses.

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

**Taken** (``TakenAtPeers``): ops it answered ``new``. An honest peer's
item set is its log, so an op it took is in its set by the next run and no
run names it as lacking again; one that does is a peer whose word is false
(it claims to lack what it claimed to take, to keep us pushing: each run
that "moved ops" is followed at once by another). Such ids are not pushed
again while remembered and are no progress; when they are many
(``TakenAtPeers.lying``: at least ``LIAR_MIN_IDS``, one push, and at least
half of the ids the rounds named as lacking), the run fails, so it is
logged and backed off and the out-link is not marked caught up.

The honest cases, and what they cost: a peer that lost ops it took from us
(purged by its admin, or restarted on a memory store) honestly lacks them
again. Those taken within the TTL are not pushed to it by us until the TTL
passes (gossip and its other peers are not affected); a few are no
failure, but a peer that lost most of what we pushed in the last hour
fails its runs, backed off, until the entries expire, then is pushed them
again. A shorter TTL would spare such a peer sooner and let a liar take
our store again sooner; an hour bounds a liar to about ``TAKEN_PER_PEER``
ops an hour (it had ~1.1M every 300 s). Not covered: a liar that names
more ids over time than ``TAKEN_PER_PEER`` holds (it rotates through a
larger store) gets them again once forgotten, oldest first.

Memory is bounded: a TTL per id (then it is pushed again once: the peer's
buffer or store may have lost it), a number of ids per peer (the oldest
forgotten first, and pushed again), and a number of ids over all peers
(past it, the peer holding the most forgets its oldest), so a relay with a
hundred peers does not hold a hundred peers' worth. What a peer says is its
word only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

PARKED_TTL_S = 3600.0  # over the periodic run interval (300 s) many times
PARKED_PER_PEER = 50_000  # ids (CID strings: some 10 MB at most per peer)
TAKEN_TTL_S = 3600.0  # an honest peer's set holds what it took by the next run
TAKEN_PER_PEER = 100_000  # one run's pushes at most (ReconcileBounds.max_have): ~20 MB
LIAR_MIN_IDS = 100  # one push: fewer are a purge or a race, not worth a failure
# over all peers, each memory: a few peers' worth (~200 bytes an id: ~80 MB)
PARKED_IN_ALL = 4 * PARKED_PER_PEER
TAKEN_IN_ALL = 4 * TAKEN_PER_PEER

Clock = Callable[[], float]


class CidsAtPeers:
    """Per peer URL: CIDs, each with when it is forgotten. A use sets its
    bounds' defaults as class attributes; each may be given instead."""

    TTL_S: float
    PER_PEER: int
    IN_ALL: int

    def __init__(
        self,
        ttl_s: float | None = None,
        per_peer: int | None = None,
        clock: Clock = time.monotonic,
        in_all: int | None = None,
    ) -> None:
        self._ttl_s = self.TTL_S if ttl_s is None else ttl_s
        self._per_peer = self.PER_PEER if per_peer is None else per_peer
        self._in_all = self.IN_ALL if in_all is None else in_all
        self._clock = clock
        self._peers: dict[str, OrderedDict[str, float]] = {}
        self._total = 0  # ids held over all peers

    def holds(self, peer: str, cid: str) -> bool:
        """``cid`` is remembered for ``peer`` (an expired entry is dropped)."""
        held = self._peers.get(peer)
        until = None if held is None else held.get(cid)
        if held is None or until is None:
            return False
        if until <= self._clock():
            del held[cid]
            self._total -= 1
            return False
        return True

    def remember(self, peer: str, cids: Iterable[str]) -> None:
        held = self._peers.setdefault(peer, OrderedDict())
        now = self._clock()
        before = len(held)
        for cid in cids:
            held.pop(cid, None)  # kept in order of expiry: re-remembered goes last
            held[cid] = now + self._ttl_s
        while held and (len(held) > self._per_peer or next(iter(held.values())) <= now):
            held.popitem(last=False)
        self._total += len(held) - before
        if not held:
            del self._peers[peer]
        while self._total > self._in_all:
            largest = max(self._peers.values(), key=len)
            for _ in range(min(len(largest), self._total - self._in_all)):
                largest.popitem(last=False)
                self._total -= 1
            self._peers = {url: ids for url, ids in self._peers.items() if ids}

    def forget(self, peer: str, cids: Iterable[str]) -> None:
        held = self._peers.get(peer)
        if held is None:
            return
        before = len(held)
        for cid in cids:
            held.pop(cid, None)
        self._total -= before - len(held)
        if not held:
            del self._peers[peer]

    def count(self, peer: str | None = None) -> int:
        """Ids held for ``peer``, or over all peers."""
        return self._total if peer is None else len(self._peers.get(peer, ()))


class ParkedAtPeers(CidsAtPeers):
    """The CIDs each peer parked when pushed: held back from later runs."""

    TTL_S, PER_PEER, IN_ALL = PARKED_TTL_S, PARKED_PER_PEER, PARKED_IN_ALL
    parked = CidsAtPeers.holds


class TakenAtPeers(CidsAtPeers):
    """The CIDs each peer answered ``new`` when pushed: named as lacking
    again, they are its word proved false (see the module docstring)."""

    TTL_S, PER_PEER, IN_ALL = TAKEN_TTL_S, TAKEN_PER_PEER, TAKEN_IN_ALL
    taken = CidsAtPeers.holds

    @staticmethod
    def lying(taken_before: int, named: int) -> bool:
        """A run's rounds named ``named`` ids as lacking, ``taken_before`` of
        them ones the peer said it took: enough of them to fail the run."""
        return taken_before >= LIAR_MIN_IDS and 2 * taken_before >= named
