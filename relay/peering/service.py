"""The peering service: composes gossip-out, read-through and sync-in over
one ``PeerClient`` and one per-peer ``Backoff`` (WEB-RELAY.md "Peering").

``build_peering()`` does no I/O. ``start(relay)`` starts the gossip workers
and, when ``sync_interval_s`` is set, the sync loop; every task is owned
here and cancelled by ``stop()`` (after a bounded gossip flush). A client
built here (none injected) is closed on stop; an injected one is not.

The replication ledger (``ledger``, ``out_links``) is shared by every
behaviour; it loads from the store on start and is written out on stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

from peer.base import (
    RELAY_SENDER_HEADER,
    RELAY_SENDER_PROOF_HEADER,
    PeerClient,
    PeerConfig,
    coordinator_hop,
    parse_peer_configs,
)
from relay.protocol import IdentityState
from relay.rules.outcomes import IngestionResult, SequencedOp, Status
from stores.base import FULL_SCOPE, LinkRecord, StoreError

from .api import PeerState
from .backoff import Backoff
from .config import PeeringConfig
from .directory import Advertised, PeerDirectory
from .discovery import learn_peers
from .echo import EchoMemory
from .fanout import FanOut, Routed, arrival_hop, arriving_with
from .gossip import Gossip, Outgoing, PushHooks
from .host import PeeringHost, QuietHost, SigningHost
from .lead import PullLead
from .ledger import DIRECTIONS, LinkLedger
from .link_view import LinkView, link_view
from .live import LiveFollow
from .read_through import ReadThrough
from .repair import ReconcileRepair, ReconcilingHost
from .scope_check import ScopeCheck
from .sender_auth import SenderAuth
from .sender_proof import ProofMinter
from .sync import SyncIn
from .tasks import cancel_all
from .watermark import OutLinks

log = logging.getLogger("dfos_relay.peering")


class Peering:
    """Implements ``relay.peering.api.PeeringService``."""

    def __init__(
        self,
        peers: Sequence[PeerConfig],
        client: PeerClient,
        config: PeeringConfig,
        *,
        owns_client: bool = False,
    ) -> None:
        self.peers = tuple(peers)
        self.config = config
        self.client = client
        self._owns_client = owns_client
        self.backoff = Backoff(config.backoff_base_s, config.backoff_max_s)
        self.echo = EchoMemory(config.echo_memory_per_peer)
        self.directory = PeerDirectory([p.url for p in peers], client, config.directory_refresh_s)
        self.gossip = Gossip(
            [p.url for p in peers if p.gossip],
            client,
            self.backoff,
            config,
            PushHooks(self.sent_us, self.push_headers, self.know),
        )
        self.fanout = FanOut(self.gossip, self.directory, config, self._did)
        self.learned: dict[str, str] = {}  # peer URL -> DID, learned by discovery
        if config.peer_discovery:
            self.directory.on_refreshed.append(self._discover)
        self.reads = ReadThrough(
            [p.url for p in peers if p.read_through], client, self.backoff, config
        )
        self.sync = SyncIn([p.url for p in peers if p.sync], client, self.backoff, config)
        # sender proofs: ours on every push, the pushers' checked on every push
        self.proofs = ProofMinter()
        self.senders = SenderAuth(
            self._identity_state, self.reads.identity_log, config.read_through_deadline_s
        )
        self.repair = ReconcileRepair([p.url for p in peers if p.reconcile], self.backoff, config)
        self.live = LiveFollow(
            [p.url for p in peers if p.live], self.sync, config, self.repair, client
        )
        self.sync.repair = self.repair
        in_scope = FULL_SCOPE if config.scope is None else config.scope.scope_id
        self._pulled = [p.url for p in peers if p.live or p.sync]
        # Until this process holds the pull lease, another one pulls.
        self.ledger = LinkLedger(
            followed=[p.url for p in peers if p.live],
            in_scope=in_scope,
            pulled_elsewhere=self._pulled,
        )
        self.lead = PullLead(self._begin_pulling, self._end_pulling)
        self.out_links = OutLinks(self.ledger)
        self.ledger.before_flush = self._follow_head
        self.ledger.shares.on_gone = self._adopt
        self.sync.ledger = self.live.ledger = self.repair.ledger = self.ledger
        # one guard of what a scoped mirror pulls, whichever way it pulls it
        self.scope_check = ScopeCheck(config.scope)
        self.scope_check.ledger = self.ledger
        self.sync.scope_check = self.repair.scope_check = self.scope_check
        self.reads.ledger = self.ledger
        self.repair.out_links = self.out_links
        self.fanout.watch = self.out_links
        for lane in self.gossip.lanes.values():
            lane.watcher = self.out_links
        self._sync_loop: asyncio.Task[None] | None = None
        self._host: PeeringHost | None = None

    async def start(self, relay: PeeringHost) -> None:
        self._host = relay
        await self.ledger.start(relay.store)
        self.scope_check.start(relay)
        self.out_links.start(list(self.gossip.lanes), await relay.store.log_length())
        await self.ledger.clear_gone_shares()  # what stopped or gone processes held back
        await self.ledger.flush()  # our shares, at once: the others' merge waits for them
        self.reads.start(relay)
        self.sync.start(relay)
        self.gossip.start()
        self.fanout.start()
        self.directory.start()
        if isinstance(relay, ReconcilingHost):
            self.repair.start(relay)  # every worker: its runs also clear its own gossip losses
        if self.config.pulls:  # the holder of the store's pull lease pulls (and announces us)
            await self.lead.start(relay.store)

    async def _begin_pulling(self) -> None:
        relay = self._host
        assert relay is not None
        await self.ledger.take_in_links(self._pulled)
        await self._announce_self(relay)
        self.live.start(relay)
        if self.config.sync_interval_s is not None and self.sync._peers:
            self._sync_loop = asyncio.create_task(self._sync_forever(), name="peer sync loop")

    async def _end_pulling(self) -> None:
        if self._sync_loop is not None:
            await cancel_all([self._sync_loop])
            self._sync_loop = None
        await self.live.stop()
        await self.ledger.leave_in_links(self._pulled)

    async def _follow_head(self) -> None:
        host = self._host
        if isinstance(host, QuietHost):
            await self.out_links.follow_head(host.store.log_length, host.ingest_quiet)

    async def _adopt(self, share: LinkRecord) -> None:
        """A gone process's share (deleted once our share carrying it is
        written): carried for the peers we push to, dropped for others."""
        if self._host is None or share.peer_url not in self.gossip.lanes:
            return
        try:
            head: int | None = await self._host.store.log_length()
        except StoreError as exc:  # carried all the same: it may hold back a loss
            log.warning("link ledger: cannot read the head: %s", exc)
            head = None
        self.out_links.adopt(share, head)

    async def stop(self) -> None:
        await self.lead.stop()
        await self.repair.stop()
        await self.directory.stop()
        await self.fanout.stop()
        await self.gossip.stop()
        await self.reads.stop()
        await self.senders.stop()
        self.sync.stop()
        await self.ledger.stop()
        self._host = None
        if self._owns_client:
            await self.client.aclose()

    async def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None) -> None:
        """Ingest listener: route every new op to gossip peers (``fanout``),
        never back to ``source``; the out-links' watermarks follow."""
        # No echo note here: a batch also sequences ops that were pending
        # from other peers; ``Relay.ingest`` notes the batch's own results.
        lanes = list(self.gossip.lanes)
        self.out_links.offered(ops, to_lanes=bool(lanes))
        self.fanout.on_sequenced(ops, source, arrival_hop())
        self.out_links.offer_done(lanes)

    async def ingest_push(
        self,
        tokens: Sequence[object],
        sender_did: str | None,
        hop: str | None,
        proof: str | None = None,
    ) -> list[IngestionResult]:
        """POST /operations from a client (no sender) or a relay naming its
        DID. A sender that ``proof`` does not prove (``senders``) is a
        client. A proven DID that maps to a peer makes that peer the source
        (nothing goes back to it) and its hop routes the ops; a proven DID
        we cannot place is a client, but what it sent is remembered under
        the DID so nothing goes back to it either once we learn its URL.
        Pending ops remember how they arrived (routed when sequenced);
        hop-"1" duplicates are forwarded still."""
        host = self._host
        if host is None:
            raise RuntimeError("peering is not started")
        # (no proof: no peer lookup, which may read peers' well-known documents)
        source = await self.peer_url_of(sender_did) if sender_did and proof else None
        if sender_did and not await self.senders.proven(sender_did, proof, self._did(), source):
            sender_did = source = None  # a client's push: no source, no hop routing
        arrival = (source, hop if source is not None else None)
        for text in tokens:
            if isinstance(text, str):
                self.fanout.arrivals.remember(text, arrival)
        with arriving_with(arrival[1]):
            results = await host.ingest(tokens, source)
        if source is None and sender_did:
            self.echo.note(sender_did, (r.cid for r in results if r.cid))
        again: list[Routed] = []
        for token, result in zip(tokens, results, strict=True):
            if not isinstance(token, str):
                continue
            if result.reason is None or not result.reason.is_dependency:
                self.fanout.arrivals.pop(token)  # routed already, or never will be
            if (
                result.status is Status.DUPLICATE and source and coordinator_hop(hop)[0]
                and result.chain_id
            ):  # fmt: skip
                again.append(Routed(result.cid, token, result.chain_id))
        if source is not None:
            self.fanout.forward_again(source, again, coordinator_hop(hop)[1])
        return results

    # the push side: who is pushing, and what not to push back -------------------
    def note_received(self, source: str, cids: Iterable[str]) -> None:
        """``source`` sent us these ops (sequenced, pending or duplicate)."""
        self.echo.note(source, cids)

    def sent_us(self, peer_url: str, cid: str) -> bool:
        """Did ``peer_url`` send us this op (under its URL, or under its DID
        while we did not know the URL yet)?"""
        if self.echo.sent_us(peer_url, cid):
            return True
        did = self.directory.did_of(peer_url)
        return did is not None and self.echo.sent_us(did, cid)

    async def peer_url_of(self, relay_did: str) -> str | None:
        """The peer URL a pushing relay's DID maps to (None: not a known peer).
        A DID we cannot place may be a peer not resolved yet (say, both just
        started): those are read first, at most once per retry interval, and
        waited for at most ``fanout_list_wait_s`` (a push is a request path)."""
        url = self.directory.url_of(relay_did)
        if url is None and self.directory.unresolved():
            wait_s = self.config.fanout_list_wait_s
            await self.directory.resolve_if_due(self.directory.unresolved(), wait_s)
            url = self.directory.url_of(relay_did)
        return url

    async def know(self, peer_url: str) -> None:
        """Before a push: learn the peer's DID if we can (echoes by DID, the
        audience of our sender proof)."""
        await self.directory.resolve_if_due([peer_url])

    def push_headers(self, peer_url: str) -> Mapping[str, str]:
        """Our DID and its proof, for a push to ``peer_url``. None until we
        know the peer's DID (the proof's audience): a claim we cannot prove
        would make the peer take us for a client all the same."""
        did = self._did()
        audience = self.directory.did_of(peer_url)
        if not did or audience is None or not isinstance(self._host, SigningHost):
            return {}
        proof = self.proofs.proof_for(audience, self._host.sign_auth_token, int(time.time()))
        return {RELAY_SENDER_HEADER: did, RELAY_SENDER_PROOF_HEADER: proof}

    def watch_unproven(self, listener: Callable[[str], None]) -> None:
        self.senders.listeners.append(listener)

    async def _identity_state(self, did: str) -> IdentityState | None:
        """``did``'s head state as our store holds it (None: not an identity here)."""
        if self._host is None:
            return None
        chain = await self._host.store.get_chain(did)
        if chain is None or chain.kind != "identity":
            return None
        return IdentityState.from_record(chain.state)

    def advertised_peers(self) -> list[dict[str, str]]:
        """The well-known ``peers``: every gossip peer, with its DID when known."""
        return [Advertised(url, self.directory.did_of(url)).as_json() for url in self.gossip.lanes]

    async def flushed(self) -> None:
        """Until forwards and gossip queues are drained (tests, benchmarks)."""
        await self.fanout.flushed()
        await self.gossip.flushed()

    def _did(self) -> str | None:
        did = getattr(self._host, "did", None) if self._host is not None else None
        return did if isinstance(did, str) else None

    async def _discover(self) -> None:
        me = self._did()
        if me is None:
            return
        configured = [p.url for p in self.peers]
        room = self.config.peer_discovery_max - len(self.learned)
        per_host = self.config.peer_discovery_per_host
        for entry in learn_peers(self.directory, configured, me, room, per_host):
            assert entry.did is not None
            self.learned[entry.url] = entry.did
            self.directory.add(entry.url, entry.did)
            self.gossip.add_lane(entry.url).watcher = self.out_links
            log.info("discovery: learned peer %s (%s)", entry.url, entry.did)

    async def read_through(self, kind: Literal["identity", "content"], chain_id: str) -> bool:
        return await self.reads.read_through(kind, chain_id)

    async def sync_once(self) -> int:
        return await self.sync.sync_once()

    async def sync_peer(self, url: str) -> int:
        if url not in {p.url for p in self.peers}:
            raise KeyError(url)
        return await self.sync.sync_peer(url)

    def peer_states(self) -> list[PeerState]:
        """Configured peers in order, then the peers discovery learned."""
        names = ("gossip", "read-through", "sync", "live", "reconcile")
        states = []
        for peer in self.peers:
            flags = (peer.gossip, peer.read_through, peer.sync, peer.live, peer.reconcile)
            behaviours = tuple(name for name, on in zip(names, flags, strict=True) if on)
            states.append(self._state(peer.url, behaviours))
        for url, did in self.learned.items():
            states.append(self._state(url, ("gossip",), did))
        return states

    def _state(self, url: str, behaviours: tuple[str, ...], did: str | None = None) -> PeerState:
        lane = self.gossip.lanes.get(url)
        return PeerState(
            url,
            behaviours,
            self.backoff.failures(url),
            round(self.backoff.delay(url), 3),
            lane.backlog if lane is not None else 0,
            lane.dropped if lane is not None else 0,
            did,
        )

    def link_views(self) -> list[LinkView]:
        """Every link of the ledger with its lag, as of now."""
        now = self.ledger.clock()
        return [link_view(r, now, self.out_links.head) for r in self.ledger.links()]

    async def pause(self, url: str, directions: Sequence[str] = DIRECTIONS) -> None:
        """Pause a configured peer's links (KeyError: not a peer)."""
        if url not in {p.url for p in self.peers}:
            raise KeyError(url)
        await self.ledger.pause(url, [d for d in DIRECTIONS if d in directions])

    async def resume(self, url: str, directions: Sequence[str] = DIRECTIONS) -> None:
        if url not in {p.url for p in self.peers}:
            raise KeyError(url)
        await self.ledger.resume(url, [d for d in DIRECTIONS if d in directions])

    async def _sync_forever(self) -> None:
        interval = self.config.sync_interval_s
        assert interval is not None
        while True:
            try:
                count = await self.sync.sync_once()
                if count:
                    log.info("sync cycle sequenced %d new ops", count)
            except Exception:  # a store failure must not end the loop silently
                log.exception("sync cycle failed")
            await asyncio.sleep(interval)

    async def _announce_self(self, relay: PeeringHost) -> None:
        """The relay's own identity ops predate the ingest listener: gossip
        them once so a gossip-only mesh learns every relay's DID too."""
        did = getattr(relay, "did", None)
        if not isinstance(did, str) or not self.gossip.lanes:
            return
        page = await relay.store.read_chain_log(did, None, 100)
        items = [Outgoing(e.cid, e.jws_token) for e in page.entries]
        profile = getattr(relay, "profile_token", None)
        if isinstance(profile, str) and profile not in {i.jws_token for i in items}:
            items.append(Outgoing("", profile))  # no CID at hand: never echo-matched
        self.fanout.broadcast(items)


def build_peering(
    peers: Iterable[object],
    peer_client: object | None = None,
    config: PeeringConfig | None = None,
) -> Peering:
    """Compose peering for ``peers`` (``PeerConfig``s, URLs or spec dicts).

    With no ``peer_client`` an ``HttpSyncClient`` (the ``HttpPeerClient``
    that also reconciles) is built (and owned).
    """
    parsed = parse_peer_configs(peers)
    owns = peer_client is None
    if peer_client is None:
        from peer.sync_http import HttpSyncClient

        peer_client = HttpSyncClient()
    return Peering(parsed, peer_client, config or PeeringConfig(), owns_client=owns)  # type: ignore[arg-type]
