"""The relay engine: one store, the ingestor, the relay identity and the
services (peering, ...) that run beside them.

The engine knows nothing of HTTP: ``relay.compose.create_relay()`` builds a
``Relay`` and hands it the function that builds its ASGI app. ``start()``
(run by the ASGI lifespan, or directly with ``async with relay.running()``)
opens the store, loads or creates the relay identity, resumes the raw-op
buffer, starts peering and the retry of ops the write policy failed on
(``relay.ingest.retry``); ``stop()`` undoes that in reverse order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

from peer.sync_http import HttpSyncClient
from relay.admin.bans import BanList
from relay.admin.purge_steps import finish_purges
from relay.config import RelayConfig
from relay.feed import Feed, FeedConfig
from relay.ingest.pipeline import Clock, Ingestor
from relay.ingest.policy import WriteGate
from relay.ingest.retry import PolicyRetry
from relay.ingest.status import OpStatusService
from relay.observability.metrics import RelayMetrics
from relay.parse_pool import ParsePool, WaitingLine
from relay.protocol import Ed25519Keypair, create_auth_token
from relay.receive_budget import ReceiveBudget
from relay.reconcile.answers import ParkedAtPeers, TakenAtPeers
from relay.reconcile.bounds import ReconcileBounds
from relay.reconcile.index import FingerprintIndex
from relay.reconcile.initiator import Direction, ReconcileReport, reconcile
from relay.reconcile.scoped import ScopedItems
from relay.reconcile.server import MAX_FETCH_CIDS, MAX_LONG_ROUNDS, Window
from relay.relay_identity import new_relay_identity
from relay.rules.outcomes import IngestionResult, SequencedOp, Status
from relay.scope import MAX_SCOPE_MEMBERS, Pulled, Scope, ScopeGuard
from relay.scope.checkpoints import ClosureCheckpoints
from stores.base import RelayIdentityRecord, RelayStore

if TYPE_CHECKING:
    from relay.peering.api import PeeringService, PeerState
    from relay.peering.link_view import LinkView

# Builds the ASGI app that serves a relay (``relay.http.app.build_app``).
AppFactory = Callable[["Relay"], Any]

log = logging.getLogger("dfos_relay")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def feed_config(config: RelayConfig) -> FeedConfig:
    return FeedConfig(
        replay_window=config.feed_replay_window,
        max_subscribers=config.feed_max_subscribers,
        heartbeat_s=config.feed_heartbeat_s,
        send_timeout_s=config.feed_send_timeout_s,
    )


class RelayNotStartedError(RuntimeError):
    pass


class Relay:
    """A DFOS relay. ``app`` is the Starlette ASGI app; ``did`` its identity."""

    def __init__(
        self,
        store: RelayStore,
        config: RelayConfig,
        clock: Clock,
        identity: RelayIdentityRecord | None,
        peering: PeeringService | None,
        app_factory: AppFactory,
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        # bans (from the store) and the write policy, asked before each commit
        self.bans = BanList(store)
        self.gate = WriteGate(config.write_policy, self.bans.lookup, config.admin_dids)
        self.ingestor = Ingestor(
            store, clock, config.max_pending, config.max_rejection_notes, self.gate,
            config.verify_threads, max_copies=config.max_copies_per_op,
        )  # fmt: skip
        self.metrics = RelayMetrics()  # per relay: its own Prometheus registry
        self.ingestor.rejections.add_listener(self.metrics.record_rejections)
        # buffered ops the write policy failed on are tried again by this task
        self.policy_retry = PolicyRetry(self.ingestor.retry_kept, self._policy_retry_delays)
        self.ingestor.on_kept = self.policy_retry.schedule
        self.status = OpStatusService(store, clock)  # explained op status, pending overview
        # request bodies being received at once, by their bytes (503 beyond)
        self.receiving = ReceiveBudget(config.receive_budget_bytes)
        self.metrics.watch_receive_budget(lambda: self.receiving.held)
        # blob uploads: one document check at a time (see relay.http.content),
        # a bounded number waiting for it (503 beyond)
        self.document_checks = asyncio.Semaphore(1)
        self.documents_waiting = WaitingLine(config.parse_queue, "document uploads")
        # Negentropy rounds that pause, running at once (503 beyond: relay.http.sync)
        self.long_rounds = WaitingLine(MAX_LONG_ROUNDS, "long negentropy rounds")
        # large POST /operations bodies are parsed in a child process
        self.parse_pool = ParsePool(max_waiting=config.parse_queue)
        self.peering = peering
        if peering is not None:
            peering.watch_unproven(self.metrics.push_unproven)
        self._given_identity = identity
        self._identity: RelayIdentityRecord | None = None
        self._keypair: Ed25519Keypair | None = None
        self.feed = Feed(store, feed_config(config), lambda: self.did)
        self.ingestor.add_listener(self._wake_feed)
        self.sync_index = FingerprintIndex(store)
        self.ingestor.add_listener(self.sync_index.on_sequenced)
        self.scoped_items = ScopedItems(store)  # scoped reconciliation's item sets
        self.parked_at_peers = ParkedAtPeers()  # pushed ops each peer parked: not pushed again
        self.taken_by_peers = TakenAtPeers()  # pushed ops each peer answered "new" to
        self.scope_checkpoints = ClosureCheckpoints()  # where scoped /log pages ended
        self._sync_client: HttpSyncClient | None = None
        self.started = False
        self._purges_left: asyncio.Task[None] | None = None
        self.app = app_factory(self)  # the ASGI app; its lifespan starts the relay

    # identity ------------------------------------------------------------
    @property
    def did(self) -> str:
        if self._identity is None:
            raise RelayNotStartedError("the relay DID is known once the relay has started")
        return self._identity.did

    @property
    def profile_token(self) -> str:
        if self._identity is None:
            raise RelayNotStartedError("relay not started")
        return self._identity.profile_token

    # lifecycle -----------------------------------------------------------
    async def start(self) -> None:
        if self.started:
            return
        await self.store.open()
        try:
            await self.feed.hub.watch(self.store)
            self.sync_index.start()
            await self.bans.refresh()
            self._identity = await self._load_identity()
            self._keypair = Ed25519Keypair.from_seed(self._identity.seed)
            resumed = await self.ingestor.drain_buffer()
            if resumed:
                log.info("resumed %d buffered operations", resumed)
            if self.peering is not None:
                self.ingestor.add_listener(self.peering.on_sequenced)
                await self.peering.start(self)
            purges_left = await self.store.purges_under_way()
            self.policy_retry.start()  # last: nothing after it can fail
            if purges_left:  # a crash cut them short: finished in steps, as ingestion goes on
                self._purges_left = asyncio.create_task(
                    self._finish_purges(), name="dfos-relay purges left under way"
                )
        except BaseException:
            await self.sync_index.stop()
            await self.feed.hub.close()
            await self.store.close()
            raise
        self.started = True

    async def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        if self._purges_left is not None:
            self._purges_left.cancel()  # a step cut short rolls back; the next start goes on
            await asyncio.gather(self._purges_left, return_exceptions=True)
            self._purges_left = None
        await self.policy_retry.stop()
        if self.peering is not None:
            await self.peering.stop()
        await self.sync_index.stop()
        if self._sync_client is not None:
            await self._sync_client.aclose()
            self._sync_client = None
        await self.feed.hub.close()
        self.gate.close()
        await self.store.close()
        self.ingestor.close()
        await self.parse_pool.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Relay]:
        await self.start()
        try:
            yield self
        finally:
            await self.stop()

    async def _load_identity(self) -> RelayIdentityRecord:
        stored = await self.store.get_relay_identity()
        identity = stored or self._given_identity
        if identity is None:
            keypair = Ed25519Keypair.generate()
            identity = new_relay_identity(keypair, self.config.profile, self.clock())
        if stored is None:
            await self.store.put_relay_identity(identity)
            # another process sharing the store may have written first: use its identity
            identity = await self.store.get_relay_identity() or identity
        self.gate.exempt(identity.did)  # the relay's own ops pass bans and policy
        results = await self.ingestor.ingest([identity.genesis_token, identity.profile_token])
        for result in results:
            if result.status is Status.REJECTED:
                raise RuntimeError(f"relay identity does not verify: {result.error}")
        return identity

    def _policy_retry_delays(self) -> tuple[float, float]:
        policy = self.gate.policy  # read at each wait: an operator may swap it
        return policy.retry_first_s, policy.retry_max_s

    def _wake_feed(self, sequenced: Sequence[SequencedOp], source: str | None) -> None:
        if sequenced:
            self.feed.hub.notify(max(op.seq for op in sequenced))

    # operations ----------------------------------------------------------
    async def ingest(
        self, tokens: Sequence[object], source: str | None = None
    ) -> list[IngestionResult]:
        """Ingest a batch; ``source`` names the peer it came from (no echo)."""
        await self.bans.refresh_if_stale()  # bans made by other workers
        results = await self.ingestor.ingest(tokens, source)
        self.metrics.record_ingestion(results)
        if source is not None and self.peering is not None:
            # echo suppression: pending and duplicate ops count, not only new ones
            self.peering.note_received(source, (r.cid for r in results if r.cid))
        return results

    async def ingest_pushed(
        self,
        tokens: Sequence[object],
        sender_did: str | None,
        hop: str | None,
        proof: str | None = None,
    ) -> list[IngestionResult]:
        """POST /operations with its relay push headers (sender DID, fan-out
        hop, sender proof); peering decides what they mean
        (``PeeringService.ingest_push``)."""
        peering = self.peering
        if peering is None or not self.started:
            return await self.ingest(tokens)
        return await peering.ingest_push(tokens, sender_did, hop, proof)

    def sign_auth_token(self, audience: str, iat: int, exp: int) -> str:
        """An auth token (PROTOCOL.md "Auth Tokens") signed by the relay
        identity key: ``iss`` = ``sub`` = the relay DID (peering's sender
        proofs)."""
        identity, keypair = self._identity, self._keypair
        if identity is None or keypair is None:
            raise RelayNotStartedError("relay not started")
        kid = f"{identity.did}#{identity.key_id}"
        return create_auth_token(keypair, kid, identity.did, audience, iat, exp)

    def advertised_peers(self) -> list[dict[str, str]]:
        """The well-known document's ``peers`` entry (additive)."""
        return [] if self.peering is None else self.peering.advertised_peers()

    async def read_through(self, kind: Literal["identity", "content"], chain_id: str) -> bool:
        """After a local miss, try the read-through peers; True if now known."""
        if self.peering is None:
            return False
        return await self.peering.read_through(kind, chain_id)

    # reconciliation --------------------------------------------------------
    def describe_sync(self) -> dict[str, object]:
        """The well-known document's ``sync`` entry (additive)."""
        return {
            "negentropy": 1,
            "frameLimit": self.config.sync_frame_limit,
            "maxMessageBytes": self.config.sync_max_message_bytes,
            "maxOperationCids": MAX_FETCH_CIDS,
            # ``scope=`` on /changes, /log and /sync/negentropy (relay.scope)
            "scopes": {"maxMembers": MAX_SCOPE_MEMBERS},
        }

    async def reconcile(
        self,
        peer_url: str,
        direction: Direction = "both",
        window: Window | None = None,
        bounds: ReconcileBounds | None = None,
        *,
        scope: Scope | None = None,
        guard: ScopeGuard | None = None,
    ) -> ReconcileReport:
        """Reconcile with ``peer_url`` (Negentropy rounds, then pull what we
        lack and push what it lacks), over ``scope`` only if given (what is
        pulled then goes through ``guard``, or one of this run's own);
        failures are in ``report.error``."""
        client = self._reconcile_client()
        peer = peer_url.rstrip("/")
        peering = self.peering
        if peering is not None and direction != "pull":
            await peering.know(peer)  # our pushes name and prove us to it
        if scope is not None and guard is None:
            guard = ScopeGuard(self.store, scope, self._out_of_scope)
        report = await reconcile(
            self, self.sync_index, client, peer,
            direction=direction, window=window, bounds=bounds, scope=scope, guard=guard,
            skip_push=(lambda cid: peering.sent_us(peer, cid)) if peering else None,
            push_headers=(lambda: peering.push_headers(peer)) if peering else None,
            parked=self.parked_at_peers, taken=self.taken_by_peers,
        )  # fmt: skip
        self.metrics.reconcile.run(report)
        return report

    def _out_of_scope(self, peer: str, outside: Sequence[Pulled]) -> None:
        self.metrics.scope_out_of_scope(peer, len(outside))

    def _reconcile_client(self) -> HttpSyncClient:
        shared = getattr(self.peering, "client", None)
        if isinstance(shared, HttpSyncClient):
            return shared
        if self._sync_client is None:
            self._sync_client = HttpSyncClient()
        return self._sync_client

    async def sync_from_peers(self) -> int:
        """One sync-in cycle over every sync peer; returns ops newly sequenced."""
        if self.peering is None:
            return 0
        return await self.peering.sync_once()

    async def sync_peer(self, url: str) -> int:
        """Sync in from one configured peer until caught up (KeyError: not a peer)."""
        if self.peering is None:
            raise KeyError(url)
        return await self.peering.sync_peer(url)

    def peer_states(self) -> list[PeerState]:
        return [] if self.peering is None else self.peering.peer_states()

    def ingest_quiet(self) -> bool:
        """No commit of this process is still being told to its listeners."""
        return self.ingestor.quiet()

    def peer_links(self) -> list[LinkView]:
        """The replication ledger's links with their lag (``GET /peers``, gauges)."""
        return [] if self.peering is None else self.peering.link_views()

    async def pause_peer(self, url: str, directions: Sequence[str] = ("in", "out")) -> None:
        """Pause replication with a configured peer (KeyError: not a peer)."""
        if self.peering is None:
            raise KeyError(url)
        await self.peering.pause(url.rstrip("/"), directions)

    async def resume_peer(self, url: str, directions: Sequence[str] = ("in", "out")) -> None:
        if self.peering is None:
            raise KeyError(url)
        await self.peering.resume(url.rstrip("/"), directions)

    async def _finish_purges(self) -> None:
        try:
            await finish_purges(self.store, self.forget_purged, self.config.purge_step_ops)
        except Exception:  # the ban stands; the next start tries again
            log.exception("a purge left under way could not be finished")

    async def forget_purged(self, finished: bool = True) -> None:
        """Ops left the store (an admin purge): what this process derived
        from them is rebuilt, and the feed's followers are told the epoch
        changed (at once here; other processes' at their next head poll).
        Other processes sharing the store rebuild their fingerprint index at
        its next use, when they see the new epoch; so does this one after a
        step of a purge not ``finished`` (a rebuild per step would read the
        log once a step)."""
        if finished:
            self.sync_index.invalidate()
        await self.feed.refresh_epoch()

    async def trigger_reconcile(self, peer_url: str) -> dict[str, Any]:
        """Run set reconciliation with a configured peer now (``POST
        /admin/peers/reconcile``); its report as JSON-ready data (KeyError:
        not a configured peer)."""
        url = peer_url.rstrip("/")
        configured = {p.url for p in self.peer_states() if p.configured}
        if self.peering is None or url not in configured:
            raise KeyError(peer_url)
        config = getattr(self.peering, "config", None)
        scope = getattr(config, "scope", None)  # a scoped mirror reconciles its scope
        return (await self.reconcile(url, scope=scope)).as_dict()
