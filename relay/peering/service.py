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
import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Literal

from peer.base import PeerClient, PeerConfig, parse_peer_configs
from relay.rules.outcomes import SequencedOp
from stores.base import FULL_SCOPE

from .api import PeerState
from .backoff import Backoff
from .config import PeeringConfig
from .gossip import Gossip
from .host import PeeringHost
from .ledger import DIRECTIONS, LinkLedger
from .link_view import LinkView, link_view
from .live import LiveFollow
from .read_through import ReadThrough
from .repair import ReconcileRepair, ReconcilingHost
from .sync import SyncIn
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
        self.gossip = Gossip([p.url for p in peers if p.gossip], client, self.backoff, config)
        self.reads = ReadThrough(
            [p.url for p in peers if p.read_through], client, self.backoff, config
        )
        self.sync = SyncIn([p.url for p in peers if p.sync], client, self.backoff, config)
        self.repair = ReconcileRepair([p.url for p in peers if p.reconcile], self.backoff, config)
        self.live = LiveFollow([p.url for p in peers if p.live], self.sync, config, self.repair)
        self.sync.repair = self.repair
        in_scope = FULL_SCOPE if config.scope is None else config.scope.scope_id
        self.ledger = LinkLedger(followed=[p.url for p in peers if p.live], in_scope=in_scope)
        self.out_links = OutLinks(self.ledger)
        self.sync.ledger = self.live.ledger = self.repair.ledger = self.ledger
        self.repair.out_links = self.out_links
        for lane in self.gossip.lanes.values():
            lane.watcher = self.out_links
        self._sync_loop: asyncio.Task[None] | None = None
        self._host: PeeringHost | None = None

    async def start(self, relay: PeeringHost) -> None:
        self._host = relay
        await self.ledger.start(relay.store)
        self.out_links.start(list(self.gossip.lanes), await relay.store.log_length())
        self.reads.start(relay)
        self.sync.start(relay)
        self.gossip.start()
        self.live.start(relay)
        if isinstance(relay, ReconcilingHost):
            self.repair.start(relay)
        await self._announce_self(relay)
        if self.config.sync_interval_s is not None and self.sync._peers:
            self._sync_loop = asyncio.create_task(self._sync_forever(), name="peer sync loop")

    async def stop(self) -> None:
        if self._sync_loop is not None:
            self._sync_loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sync_loop
            self._sync_loop = None
        await self.repair.stop()
        await self.live.stop()
        await self.gossip.stop()
        await self.reads.stop()
        self.sync.stop()
        await self.ledger.stop()
        self._host = None
        if self._owns_client:
            await self.client.aclose()

    async def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None) -> None:
        """Ingest listener: offer every new op to the gossip peers but ``source``."""
        self.out_links.offered(ops)
        self.gossip.offer([op.jws_token for op in ops], source)
        self.out_links.offer_done(list(self.gossip.lanes))

    async def read_through(self, kind: Literal["identity", "content"], chain_id: str) -> bool:
        return await self.reads.read_through(kind, chain_id)

    async def sync_once(self) -> int:
        return await self.sync.sync_once()

    async def sync_peer(self, url: str) -> int:
        if url not in {p.url for p in self.peers}:
            raise KeyError(url)
        return await self.sync.sync_peer(url)

    def peer_states(self) -> list[PeerState]:
        states = []
        for peer in self.peers:
            lane = self.gossip.lanes.get(peer.url)
            names = ("gossip", "read-through", "sync", "live", "reconcile")
            flags = (peer.gossip, peer.read_through, peer.sync, peer.live, peer.reconcile)
            states.append(
                PeerState(
                    peer.url,
                    tuple(name for name, on in zip(names, flags, strict=True) if on),
                    self.backoff.failures(peer.url),
                    round(self.backoff.delay(peer.url), 3),
                    lane.backlog if lane is not None else 0,
                    lane.dropped if lane is not None else 0,
                )
            )
        return states

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
        tokens = [e.jws_token for e in page.entries]
        profile = getattr(relay, "profile_token", None)
        if isinstance(profile, str) and profile not in tokens:
            tokens.append(profile)
        self.gossip.offer(tokens, None)


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
