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
  list (read from its well-known ``peers``; fetched if not cached). If the
  list cannot be read, or it does not make us a coordinator even after one
  re-read, nothing is forwarded: reconciliation repairs. Only share members
  we have a gossip lane for are sent to (we never POST to a URL just because
  another relay named it).
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
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from peer.base import HOP_FORWARDED, HOP_TO_COORDINATOR
from relay.rules.outcomes import SequencedOp

from .config import PeeringConfig
from .directory import PeerDirectory
from .gossip import Gossip, Outgoing
from .rendezvous import coordinators, rank, share_of

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

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_token: dict[bytes, Arrival] = {}

    @staticmethod
    def _key(token: str) -> bytes:
        return hashlib.blake2b(token.encode("utf-8", "replace"), digest_size=16).digest()

    def remember(self, token: str, arrival: Arrival) -> None:
        key = self._key(token)
        self._by_token.pop(key, None)
        self._by_token[key] = arrival
        while len(self._by_token) > self._limit:
            del self._by_token[next(iter(self._by_token))]

    def pop(self, token: str) -> Arrival | None:
        return self._by_token.pop(self._key(token), None) if self._by_token else None

    def __len__(self) -> int:
        return len(self._by_token)


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
        self._queue: asyncio.Queue[tuple[str, list[Routed]]] = asyncio.Queue(
            maxsize=config.fanout_forward_queue_max
        )
        self.arrivals = Arrivals(config.fanout_forward_queue_max)
        self._task: asyncio.Task[None] | None = None
        self.forwarded = 0  # ops x peers forwarded as a coordinator
        self.not_forwarded = 0  # hop-1 ops we could not place (reconciliation repairs)

    @property
    def rendezvous(self) -> bool:
        return len(self._gossip.lanes) > self._config.fanout_direct_max

    def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None, hop: str | None) -> None:
        """Route each op by how it arrived (``Arrivals``), else by its batch."""
        groups: dict[Arrival, list[Routed]] = defaultdict(list)
        for op in ops:
            arrival = self.arrivals.pop(op.jws_token)
            groups[arrival or (source, hop)].append(Routed.of(op))
        for (op_source, op_hop), group in groups.items():
            self.route(group, op_source, op_hop)

    def route(self, ops: Sequence[Routed], source: str | None, hop: str | None) -> None:
        if not ops or not self._gossip.lanes:
            return
        if source is None:
            self.originate(ops)
        elif hop == HOP_TO_COORDINATOR:
            self._enqueue(source, list(ops))
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
            for did in coordinators(_ranked(known, op)):
                per_url[known[did]].append(_out(op, HOP_TO_COORDINATOR))
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
    def forward_again(self, origin_url: str, ops: list[Routed]) -> None:
        """Hop-"1" ops we already had: our share still relies on us."""
        if ops and self._gossip.lanes:
            self._enqueue(origin_url, ops)

    def _enqueue(self, origin_url: str, ops: list[Routed]) -> None:
        try:
            self._queue.put_nowait((origin_url, ops))
        except asyncio.QueueFull:
            self.not_forwarded += len(ops)
            log.warning("fan-out: forward queue full; %d ops not forwarded", len(ops))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="fan-out forwarder")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def flushed(self) -> None:
        """Until every queued forward has been handed to the gossip lanes."""
        await self._queue.join()

    async def _run(self) -> None:
        while True:
            origin_url, ops = await self._queue.get()
            try:
                await self._forward(origin_url, ops)
            except Exception:  # one bad batch must not end forwarding
                log.exception("fan-out: forwarding for %s failed", origin_url)
            finally:
                self._queue.task_done()

    async def _forward(self, origin_url: str, ops: list[Routed]) -> None:
        me = self._self_did()
        if me is None:
            self.not_forwarded += len(ops)
            return
        if self._directory.peers_of(origin_url) is None:
            await self._directory.resolve(origin_url)
        per_url: dict[str, list[Outgoing]] = defaultdict(list)
        reread = False
        for op in ops:
            share = self._share(me, origin_url, op)
            if share is None and not reread:
                reread = True  # the cached list may be stale: read it once more
                await self._directory.resolve(origin_url)
                share = self._share(me, origin_url, op)
            if share is None:
                self.not_forwarded += 1
                continue
            for url in share:
                per_url[url].append(_out(op, HOP_FORWARDED))
        for url, items in per_url.items():
            self.forwarded += len(items)
            self._gossip.send(url, items)

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
