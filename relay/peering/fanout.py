"""Which gossip peers a newly sequenced op goes to (issue 15, "A large mesh:
rendezvous fan-out").

How an op arrived decides where it goes:

- **originated here** (a client POST, a POST whose sender DID we cannot map
  to a peer, our own ops): with P gossip peers and P <= ``fanout_direct_max``
  it is pushed to every peer as before (no hop header, so receivers flood it
  on as today's relays do). Above that, it goes to the op's top-k
  coordinators (``rendezvous``) with hop "1"; peers whose DID we do not know
  yet cannot be ranked by anyone, so they get the op directly with hop "2".
- **hop "1"** (we are a coordinator for the sending origin): the forwarder
  task forwards it with hop "2" to our share of the origin's advertised peer
  list (read from its well-known ``peers``). One task serves every origin,
  so it never waits long on one: when the list is not cached, or the cached
  one does not make us a coordinator and was read before the op arrived
  (the origin named us by a newer one, say), the list is read again, at
  most once per ``fanout_reread_s`` and waited for at most
  ``fanout_list_wait_s`` (the read goes on in the background). A list read
  after the op arrived that does not make us a coordinator is believed:
  nothing is forwarded (the origin's list is the stale one). Otherwise our
  share is unknown and the op goes with hop "2" to every gossip peer but
  the origin: a superset of the share (ops are idempotent and verified on
  ingest), and no more than a push without a hop gets. Only peers we have a
  gossip lane for are sent to (we never POST to a URL just because another
  relay named it).
- **stand-ins**: an origin that sees one of an op's coordinators failing
  (backed off by its gossip lane) gives that coordinator's role to the
  next-ranked healthy peer with hop "1:<coordinator DID>"; the stand-in
  forwards the failed coordinator's share (minus itself). The origin still
  makes k pushes per op, and the share is not lost with its coordinator:
  without this, a down coordinator left its whole share to reconciliation,
  and dependants waiting at other peers for that op with it.
- **hop "2"**: not forwarded.
- **from a peer without a hop** (a v0.7.1 relay's push, sync-in, live follow,
  a reconcile pull): flooded to every gossip peer but the source, as before.
  That is fine for small meshes; a large mesh of our relays uses hops.

The hop of the POST being ingested reaches the ingest listener through a
context variable set around ``Relay.ingest`` by ``arriving_with``: the
listener runs inside that call, in the same task, and the ingest pipeline's
listener signature stays (ops, source).

Routing is per op, by how *that op* arrived: an op that waited for a
dependency is sequenced later inside some other batch (perhaps a hop-"2"
push, which forwards nothing), so ``Arrivals`` remembers (bounded) how each
pushed op arrived, and the listener routes it by that. It is written before
the ingest (a concurrent push may sequence the op before ours returns) and
kept afterwards only for the ops that went pending.
A coordinator also forwards a hop-"1" op it already had (``duplicate``):
its share relies on it, whatever path brought the op here first.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from peer.base import HOP_FORWARDED, HOP_STAND_IN_PREFIX, HOP_TO_COORDINATOR, coordinator_hop
from relay.rules.outcomes import SequencedOp

from .config import PeeringConfig
from .directory import PeerDirectory
from .gossip import Gossip, Outgoing
from .rendezvous import coordinators, rank, share_of
from .tasks import cancel_all

log = logging.getLogger("dfos_relay.peering")

_arrival_hop: ContextVar[str | None] = ContextVar("dfos_relay_arrival_hop", default=None)


@contextlib.contextmanager
def arriving_with(hop: str | None) -> Iterator[None]:
    """Ops ingested inside this block arrived with fan-out ``hop``."""
    token = _arrival_hop.set(hop)
    try:
        yield
    finally:
        _arrival_hop.reset(token)


def arrival_hop() -> str | None:
    return _arrival_hop.get()


@dataclass(frozen=True, slots=True)
class Routed:
    """What routing needs of an op."""

    cid: str
    jws_token: str
    chain_id: str

    @classmethod
    def of(cls, op: SequencedOp) -> Routed:
        return cls(op.cid, op.jws_token, op.chain_id)


Arrival = tuple[str | None, str | None]  # (source peer URL, hop)


class Arrivals:
    """How pushed ops arrived, by a digest of the token (its CID is not
    known before the ingest decodes it); the oldest are forgotten past
    ``limit`` (such an op is then routed by the batch that sequences it, and
    reconciliation covers any gap)."""

    # An op may arrive more than once before it sequences (a stand-in also
    # sits in another coordinator's share): each way it came is kept, so a
    # later plain copy does not erase the role an earlier one gave us.
    WAYS_MAX = 4

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_token: dict[bytes, tuple[Arrival, ...]] = {}

    @staticmethod
    def _key(token: str) -> bytes:
        return hashlib.blake2b(token.encode("utf-8", "replace"), digest_size=16).digest()

    def remember(self, token: str, arrival: Arrival) -> None:
        key = self._key(token)
        ways = self._by_token.pop(key, ())
        if arrival not in ways:
            ways = (*ways, arrival)[-self.WAYS_MAX :]
        self._by_token[key] = ways
        while len(self._by_token) > self._limit:
            del self._by_token[next(iter(self._by_token))]

    def pop(self, token: str) -> tuple[Arrival, ...]:
        return self._by_token.pop(self._key(token), ()) if self._by_token else ()

    def __len__(self) -> int:
        return len(self._by_token)


class ForwardWatch(Protocol):
    """What the out-links learn of the forward queue (``OutLinks``)."""

    def forwarding(self, tokens: Sequence[str]) -> None: ...
    def forwarded(
        self, tokens: Sequence[str], lost: bool = False, links: Collection[str] | None = None
    ) -> None: ...


def _out(op: Routed, hop: str | None) -> Outgoing:
    return Outgoing(op.cid, op.jws_token, hop)


class FanOut:
    def __init__(
        self,
        gossip: Gossip,
        directory: PeerDirectory,
        config: PeeringConfig,
        self_did: Callable[[], str | None],
    ) -> None:
        self._gossip = gossip
        self._directory = directory
        self._config = config
        self._self_did = self_did
        # (origin URL, ops, the coordinator we stand in for: None when ourselves)
        # (origin URL, ops, stand-in for, monotonic time they arrived)
        self._queue: asyncio.Queue[tuple[str, list[Routed], str | None, float]] = asyncio.Queue(
            maxsize=config.fanout_forward_queue_max
        )
        self.arrivals = Arrivals(config.fanout_forward_queue_max)
        self._task: asyncio.Task[None] | None = None
        self.forwarded = 0  # ops x peers forwarded as a coordinator
        self.not_forwarded = 0  # hop-1 ops not ours, or not placed (reconciliation repairs)
        self.flooded = 0  # hop-1 ops whose share was unknown: sent to every lane
        self.stood_in = 0  # coordinator roles given to a stand-in (the coordinator failing)
        # the out-links: forwards held below their watermarks until handed to lanes
        self.watch: ForwardWatch | None = None

    @property
    def rendezvous(self) -> bool:
        return len(self._gossip.lanes) > self._config.fanout_direct_max

    def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None, hop: str | None) -> None:
        """Route each op by how it arrived (``Arrivals``), else by its batch."""
        groups: dict[Arrival, list[Routed]] = defaultdict(list)
        for op in ops:
            routed = Routed.of(op)
            for arrival in self.arrivals.pop(op.jws_token) or ((source, hop),):
                groups[arrival].append(routed)
        for (op_source, op_hop), group in groups.items():
            self.route(group, op_source, op_hop)

    def route(self, ops: Sequence[Routed], source: str | None, hop: str | None) -> None:
        if not ops or not self._gossip.lanes:
            return
        to_coordinator, stand_in_for = coordinator_hop(hop)
        if source is None:
            self.originate(ops)
        elif to_coordinator:
            self._enqueue(source, list(ops), stand_in_for)
        elif hop == HOP_FORWARDED:
            return
        else:
            self._gossip.offer([_out(op, None) for op in ops], source)

    def originate(self, ops: Sequence[Routed]) -> None:
        if not self.rendezvous:
            self._gossip.offer([_out(op, None) for op in ops], None)
            return
        known: dict[str, str] = {}
        unranked: list[str] = []
        for url in self._gossip.lanes:
            did = self._directory.did_of(url)
            if did is None:
                unranked.append(url)
            else:
                known.setdefault(did, url)
        per_url: dict[str, list[Outgoing]] = defaultdict(list)
        for op in ops:
            ranked = _ranked(known, op)
            top = coordinators(ranked)
            spare = (did for did in ranked[len(top) :] if self._gossip.healthy(known[did]))
            for did in top:
                stand_in = None if self._gossip.healthy(known[did]) else next(spare, None)
                if stand_in is None:
                    per_url[known[did]].append(_out(op, HOP_TO_COORDINATOR))
                else:
                    self.stood_in += 1
                    per_url[known[stand_in]].append(_out(op, HOP_STAND_IN_PREFIX + did))
            for url in unranked:
                per_url[url].append(_out(op, HOP_FORWARDED))
        for url, items in per_url.items():
            self._gossip.send(url, items)

    def broadcast(self, items: list[Outgoing]) -> None:
        """Every lane (announcements); with hop "2" in rendezvous mode, so
        receivers do not flood them on."""
        hop = HOP_FORWARDED if self.rendezvous else None
        self._gossip.offer([Outgoing(i.cid, i.jws_token, hop) for i in items], None)

    # the coordinator side -------------------------------------------------------
    def forward_again(
        self, origin_url: str, ops: list[Routed], stand_in_for: str | None = None
    ) -> None:
        """Hop-"1" ops we already had: our share still relies on us."""
        if ops and self._gossip.lanes:
            self._enqueue(origin_url, ops, stand_in_for)

    def _enqueue(self, origin_url: str, ops: list[Routed], stand_in_for: str | None) -> None:
        tokens = [op.jws_token for op in ops]
        if self.watch is not None:
            self.watch.forwarding(tokens)
        try:
            self._queue.put_nowait((origin_url, ops, stand_in_for, time.monotonic()))
        except asyncio.QueueFull:
            self.not_forwarded += len(ops)
            log.warning("fan-out: forward queue full; %d ops not forwarded", len(ops))
            if self.watch is not None:  # lost for the links of their shares only
                for share, dropped in self._shares_now(origin_url, ops, stand_in_for).items():
                    self.watch.forwarded([op.jws_token for op in dropped], lost=True, links=share)

    def _shares_now(
        self, origin_url: str, ops: list[Routed], stand_in_for: str | None
    ) -> dict[frozenset[str] | None, list[Routed]]:
        """``ops`` by the lanes ``_forward`` would send them to, as far as
        that is known without I/O; None: not known (our DID or the origin's
        list not known yet, or a cached list that does not make us a
        coordinator: ``_forward`` would read it again)."""
        me = stand_in_for or self._self_did()
        by_share: dict[frozenset[str] | None, list[Routed]] = defaultdict(list)
        for op in ops:
            share = self._share(me, origin_url, op) if me is not None else None
            by_share[frozenset(share) if share is not None else None].append(op)
        return by_share

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="fan-out forwarder")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_all([self._task])
            self._task = None

    async def flushed(self) -> None:
        """Until every queued forward has been handed to the gossip lanes."""
        await self._queue.join()

    async def _run(self) -> None:
        while True:
            origin_url, ops, stand_in_for, arrived = await self._queue.get()
            unplaced: list[Routed] = ops  # until _forward says otherwise: every link is held
            try:
                unplaced = await self._forward(origin_url, ops, arrived, stand_in_for)
            except Exception:  # one bad batch must not end forwarding
                log.exception("fan-out: forwarding for %s failed", origin_url)
            finally:
                if self.watch is not None:
                    lost = {op.jws_token for op in unplaced}
                    done = [op.jws_token for op in ops if op.jws_token not in lost]
                    self.watch.forwarded(done)
                    self.watch.forwarded([op.jws_token for op in unplaced], lost=True)
                self._queue.task_done()

    async def _forward(
        self, origin_url: str, ops: list[Routed], arrived: float, stand_in_for: str | None = None
    ) -> list[Routed]:
        """Hand ``ops`` to the lanes of our share (every lane but the
        origin's when the share is unknown); returns those not handed to any
        lane because we do not know our own DID yet: no link may count them
        as delivered."""
        me = stand_in_for or self._self_did()
        if me is None:
            self.not_forwarded += len(ops)
            return ops
        per_url: dict[str, list[Outgoing]] = defaultdict(list)
        fresh: bool | None = None  # was the cached list read after the ops arrived? (asked once)
        for op in ops:
            share = self._share(me, origin_url, op)
            if share is None and fresh is None:
                wait_s, every_s = self._config.fanout_list_wait_s, self._config.fanout_reread_s
                fresh = await self._directory.reread(origin_url, arrived, every_s, wait_s)
                share = self._share(me, origin_url, op)
            if share is None and fresh:
                self.not_forwarded += 1  # not ours by a list read since: nothing is held
                continue
            if share is None:  # unknown share: all of them, rather than a hole
                self.flooded += 1
                share = [url for url in self._gossip.lanes if url != origin_url]
            for url in share:
                per_url[url].append(_out(op, HOP_FORWARDED))
        for url, items in per_url.items():
            self.forwarded += len(items)
            self._gossip.send(url, items)
        return []

    def _share(self, me: str, origin_url: str, op: Routed) -> list[str] | None:
        """The URLs of our lanes in our share of ``op`` (None: not ours)."""
        advertised = self._directory.peers_of(origin_url)
        if advertised is None:
            return None
        dids = {entry.did: entry.url for entry in advertised if entry.did}
        share = share_of(me, dids, op.chain_id, op.cid)
        if share is None:
            return None
        urls = []
        for did in share:
            url = self._directory.url_of(did) or dids[did]
            if url in self._gossip.lanes:
                urls.append(url)
        return urls


def _ranked(known: dict[str, str], op: Routed) -> list[str]:
    return rank(known, op.chain_id, op.cid)
