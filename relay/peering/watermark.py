"""Out-links of the replication ledger: a per-peer push watermark.

The watermark of a gossip peer is the highest seq W of our log such that
every op up to W was delivered to that peer by gossip, or deliberately not
pushed to it (history from before the link existed, an op that came from
that peer, an op routed elsewhere). It is

    min(head, floor, min(outstanding) - 1)

where ``outstanding`` are the seqs queued for the peer and not yet
delivered, and ``floor`` holds the watermark below ops gossip lost for it
(a full queue, a batch given up after its attempts, a shutdown with ops
still queued: the watermark stored at the last stop; a coordinator's
forward its forward queue had no room for: the links of the op's share, or
every link when the share is not known without I/O). Only a successful
reconciliation that pushed to the peer clears the floor: then the peer
holds everything we held when the run began.

The gossip lanes report through the ``LaneWatcher`` hooks of
``relay.peering.gossip``; tokens map to seqs through ``offered`` (the
ingest listener registers the ops it is about to offer). Tokens the map
does not know (the relay's own identity ops at start) are not tracked.

Several processes on one store: each pushes the ops it ingested itself,
and this watermark is its share of the link (``relay.peering.shares``).
Ops other processes ingested are not this one's to push, so its head
follows the store's log (``follow_head``), but only while none of its own
commits is between its commit and ``offered`` (the ingestor is ``quiet``):
an op of its own is never passed before it is queued. The share of a gone
process is carried by the process that clears it (``adopt``): its
watermark becomes a floor, as this process's own stored watermark was at
its start, since a process that did not stop cleanly may have lost ops it
had queued since it last wrote its share.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence

from relay.protocol.untrusted import ascii_decimal
from relay.rules.outcomes import SequencedOp
from stores.base import LINK_PENDING_MAX, LinkRecord, LinkState

from .ledger import LinkLedger


class OutLinks:
    """Implements ``relay.peering.gossip.LaneWatcher`` over the ledger."""

    def __init__(self, ledger: LinkLedger) -> None:
        self.ledger = ledger
        self.head = 0
        self._seq_of: dict[str, int] = {}
        self._outstanding: dict[str, dict[str, int]] = {}  # url -> token -> seq
        self._floor: dict[str, int] = {}
        # ops a coordinator holds for the fan-out's forward task: which lanes
        # get them is known only then, so they hold every lane's watermark
        self._forwarding: dict[str, list[int]] = {}  # token -> [seq, batches holding it]
        self._forward_min: int | None = None  # the lowest seq held so
        self._urls: set[str] = set()  # the out-links reported

    def start(self, urls: Sequence[str], head: int) -> None:
        """Our head at start (what earlier processes held back is ``adopt``ed)."""
        self.head = head
        self._urls.update(urls)
        for url in urls:
            self._report(url)

    async def follow_head(self, read_head: Callable[[], Awaitable[int]],
                          quiet: Callable[[], bool]) -> None:  # fmt: skip
        """Move our head to the store's: ops up to it that are not ours are
        not ours to push. ``quiet`` is asked after the read: then every op
        of ours up to the head read was ``offered`` already."""
        if not self._urls:
            return
        head = await read_head()
        if head > self.head and quiet():
            self.head = head
            for url in self._urls:
                self._report(url)

    def adopt(self, share: LinkRecord, store_head: int | None) -> None:
        """Carry a gone process's share of an out-link: below the store's
        head (None: not known), its watermark holds ours as a floor
        (repairing) until a reconciliation pushes to the peer."""
        url = share.peer_url
        stored = share.applied_token
        mark = (ascii_decimal(stored) if stored is not None else None) or 0
        if store_head is not None and mark >= store_head:
            return
        self._urls.add(url)
        self._floor[url] = min(self._floor.get(url, mark), mark)
        self.ledger.note(url, "out", state="repairing")
        self._report(url)

    # the ingest listener -------------------------------------------------------
    def offered(self, ops: Sequence[SequencedOp], to_lanes: bool = True) -> None:
        """New ops; ``to_lanes`` false: no gossip lane will queue them, so
        only the head moves (no per-op bookkeeping on the ingest path)."""
        if to_lanes:
            for op in ops:
                self._seq_of[op.jws_token] = op.seq
        self.head = max(self.head, max((op.seq for op in ops), default=0))

    def offer_done(self, urls: Sequence[str]) -> None:
        self._seq_of.clear()
        self._urls.update(urls)
        for url in urls:  # their watermark moved with the head if nothing was queued
            self._report(url)

    # the fan-out's forward queue (coordinators) ----------------------------------
    def forwarding(self, tokens: Sequence[str]) -> None:
        """Ops put on the forward queue (during ``offered``: their seqs are
        known). A token may sit in two batches (as coordinator and stand-in):
        it is held until both are done."""
        for token in tokens:
            seq = self._seq_of.get(token)
            if seq is None:
                continue
            held = self._forwarding.get(token)
            if held is None:
                self._forwarding[token] = [seq, 1]
            else:
                held[1] += 1
            if self._forward_min is None or seq < self._forward_min:
                self._forward_min = seq

    def forwarded(
        self, tokens: Sequence[str], lost: bool = False, links: Collection[str] | None = None
    ) -> None:
        """The forward task is done with ``tokens``: handed to their lanes
        (``queued`` took them), not ours to forward, or ``lost`` (the queue
        was full, or we could not place them): then the lanes of ``links``,
        their share, are held below them until a repair (every lane when
        ``links`` is None: the share is not known)."""
        seqs: list[int] = []
        released = False
        for token in tokens:
            held = self._forwarding.get(token)
            if held is None:
                continue
            seqs.append(held[0])
            held[1] -= 1
            if held[1] == 0:
                del self._forwarding[token]
                released = released or held[0] == self._forward_min
        if lost and seqs:
            if links is not None:
                self._urls.update(links)
            for url in self._urls if links is None else links:
                self._floor[url] = min(self._floor.get(url, self.head), min(seqs) - 1)
                self.ledger.note(url, "out", state="repairing")
        if released:
            self._forward_min = min((h[0] for h in self._forwarding.values()), default=None)
        if released or (lost and seqs):  # the watermarks move only then
            for url in self._urls:
                self._report(url)

    def _held_seq(self, token: str) -> int | None:
        seq = self._seq_of.get(token)
        if seq is None and (held := self._forwarding.get(token)) is not None:
            seq = held[0]
        return seq

    # LaneWatcher -----------------------------------------------------------------
    def queued(self, url: str, tokens: Sequence[str]) -> None:
        self._urls.add(url)
        lane = self._outstanding.setdefault(url, {})
        for token in tokens:
            seq = self._held_seq(token)
            if seq is not None:
                lane[token] = seq

    def lost(self, url: str, tokens: Sequence[str]) -> None:
        lane = self._outstanding.setdefault(url, {})
        seqs = [s for s in (lane.pop(t, None) or self._held_seq(t) for t in tokens) if s]
        if seqs:
            self._floor[url] = min(self._floor.get(url, self.head), min(seqs) - 1)
            self.ledger.note(url, "out", state="repairing")
            self._report(url)

    async def before_delivery(self, url: str) -> None:
        await self.ledger.wait_unpaused(url, "out")

    async def delivered(self, url: str, tokens: Sequence[str]) -> None:
        lane = self._outstanding.setdefault(url, {})
        for token in tokens:
            lane.pop(token, None)
        self._report(url)
        # held below lost ops, the link is repairing however well gossip goes now
        target: LinkState = "repairing" if url in self._floor else "live"
        if self.ledger.get(url, "out").state != target:
            await self.ledger.set_state(url, "out", target)
        await self.ledger.success(url, "out")

    async def failed(self, url: str, error: BaseException) -> None:
        await self.ledger.failure(url, "out", error)

    # reconciliation --------------------------------------------------------------
    async def repaired(self, url: str, head_at_start: int) -> None:
        """A reconciliation pushed to ``url``: it holds everything up to ``head_at_start``."""
        floor = self._floor.get(url)
        if floor is None:
            return
        if head_at_start >= self.head:
            del self._floor[url]
        else:
            self._floor[url] = max(floor, head_at_start)
        self._report(url)
        if url not in self._floor:
            await self.ledger.set_state(url, "out", "live")

    def watermark(self, url: str) -> int:
        outstanding = self._outstanding.get(url) or {}
        marks = [self.head, self._floor.get(url, self.head)]
        if outstanding:
            marks.append(min(outstanding.values()) - 1)
        if self._forward_min is not None:
            marks.append(self._forward_min - 1)
        return max(0, min(marks))

    def _report(self, url: str) -> None:
        mark = self.watermark(url)
        queued = sorted((self._outstanding.get(url) or {}).values())
        changes: dict[str, object] = {
            "applied_token": str(mark),
            "received_token": str(queued[-1]) if queued else str(self.head),
            "pending_tokens": tuple(str(s) for s in queued[:LINK_PENDING_MAX]),
            "remote_head": None,
        }
        if mark >= self.head:
            changes["caught_up_ms"] = self.ledger.clock()
        self.ledger.note(url, "out", **changes)
