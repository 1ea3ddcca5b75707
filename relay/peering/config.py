"""Peering limits as data: every default is a named constant."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from relay.reconcile.bounds import ReconcileBounds
from relay.scope import Scope

GOSSIP_BATCH = 100  # openapi.yaml: POST /operations takes at most 100 ops
GOSSIP_QUEUE_MAX = 10_000  # per peer; past this, new ops are dropped (sync repairs)
GOSSIP_MAX_ATTEMPTS = 8  # per batch, then dropped (sync repairs)
GOSSIP_FLUSH_TIMEOUT_S = 2.0  # bounded flush on shutdown
SYNC_PAGE_LIMIT = 1000  # the spec's max page size
SYNC_BUDGET_OPS = 20_000  # per peer per cycle, so one huge peer cannot starve others
# ... and seconds: a cycle waits for every peer's, and a peer serving pages
# slowly (each within the request deadline) must not hold it for long either
SYNC_CYCLE_S = 30.0
READ_THROUGH_DEADLINE_S = 5.0  # how long a GET waits for a read-through
READ_THROUGH_MAX_OPS = 10_000  # per chain log fetched from a peer
READ_THROUGH_PAGE_LIMIT = 1000
# how long the task behind a read-through (which goes on after the GET got
# its 404, to fill the store) asks one peer for pages: a peer serving a page
# at a time slowly, or a content chain of many unknown signers, stops there
READ_THROUGH_FETCH_S = 30.0
# chain fetches from one read-through peer at once (each holds a connection
# of the pool every peer shares: a slow peer must not hold it all)
READ_THROUGH_PEER_FETCHES = 8
# a ``live`` peer's feed that sends no event (heartbeat comments only) for
# this long before its EOSE is stalled: the link is shown ``degraded_poll``,
# the peer's log is polled and the feed tried again with backoff
LIVE_STALL_S = 60.0
RECONCILE_INTERVAL_S = 300.0  # between runs per reconcile peer
RECONCILE_WINDOW_S = 24 * 3600.0  # periodic runs cover this much recent createdAt
RECONCILE_FULL_EVERY = 12  # ... and every Nth periodic run covers everything
# runs right after one cut short by its bounds that moved ops (1.1M ids each
# way with the default bounds), before the next waits for the interval
RECONCILE_FOLLOW_ONS = 10
RECONCILE_BOUNDS = ReconcileBounds()  # per run: rounds, bytes, wall time, ids each way
FANOUT_DIRECT_MAX = 4  # up to this many gossip peers: push every op to each (no rendezvous)
FANOUT_FORWARD_QUEUE_MAX = 10_000  # ops waiting at a coordinator to be forwarded
# One forwarder serves every origin: it waits at most this long for an
# origin's well-known document (its peer list), and reads it again at most
# once per FANOUT_REREAD_S (when its copy predates the op); a list it could
# not read in time is an unknown share, and the ops are forwarded to every
# gossip peer instead
FANOUT_LIST_WAIT_S = 0.5
FANOUT_REREAD_S = 0.25
ECHO_MEMORY_PER_PEER = 20_000  # op CIDs remembered per peer for echo suppression
DIRECTORY_REFRESH_S = 300.0  # re-read peers' well-known documents (DID, peers)
PEER_DISCOVERY_MAX = 64  # learned peers-of-peers, at most
PEER_DISCOVERY_PER_HOST = 1  # ... and peers per host name (configured ones count), at most
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 60.0


@dataclass(frozen=True, slots=True)
class PeeringConfig:
    sync_interval_s: float | None = None  # None: sync only when asked
    sync_budget_ops: int = SYNC_BUDGET_OPS
    sync_page_limit: int = SYNC_PAGE_LIMIT
    sync_cycle_s: float = SYNC_CYCLE_S  # no page is asked for after this long in a cycle
    gossip_batch: int = GOSSIP_BATCH
    gossip_queue_max: int = GOSSIP_QUEUE_MAX
    gossip_max_attempts: int = GOSSIP_MAX_ATTEMPTS
    gossip_flush_timeout_s: float = GOSSIP_FLUSH_TIMEOUT_S
    read_through_deadline_s: float = READ_THROUGH_DEADLINE_S
    read_through_max_ops: int = READ_THROUGH_MAX_OPS
    read_through_page_limit: int = READ_THROUGH_PAGE_LIMIT
    read_through_fetch_s: float = READ_THROUGH_FETCH_S
    read_through_peer_fetches: int = READ_THROUGH_PEER_FETCHES
    live_stall_s: float = LIVE_STALL_S
    backoff_base_s: float = BACKOFF_BASE_S
    backoff_max_s: float = BACKOFF_MAX_S
    reconcile_interval_s: float | None = RECONCILE_INTERVAL_S  # None: after start and gaps only
    reconcile_window_s: float = RECONCILE_WINDOW_S
    reconcile_full_every: int = RECONCILE_FULL_EVERY
    reconcile_bounds: ReconcileBounds = RECONCILE_BOUNDS
    reconcile_follow_ons: int = RECONCILE_FOLLOW_ONS
    scope: Scope | None = None  # pull only this scope (and its closure) from peers
    fanout_direct_max: int = FANOUT_DIRECT_MAX
    fanout_forward_queue_max: int = FANOUT_FORWARD_QUEUE_MAX
    fanout_list_wait_s: float = FANOUT_LIST_WAIT_S
    fanout_reread_s: float = FANOUT_REREAD_S
    echo_memory_per_peer: int = ECHO_MEMORY_PER_PEER
    directory_refresh_s: float = DIRECTORY_REFRESH_S
    peer_discovery: bool = False  # opt-in: learn peers of peers as gossip peers
    peer_discovery_max: int = PEER_DISCOVERY_MAX
    peer_discovery_per_host: int = PEER_DISCOVERY_PER_HOST
    # This process may follow live peers and poll sync peers: of the
    # processes on one store, the holder of its pull lease does
    # (``relay.peering.lead``), so a peer's feed is followed once per store;
    # every process still pushes what it ingests, reads through, reconciles
    # on schedule and answers on-demand syncs. False: never this one.
    pulls: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.gossip_batch <= GOSSIP_BATCH:
            raise ValueError(f"gossip_batch must be 1..{GOSSIP_BATCH}")
        if self.sync_interval_s is not None and self.sync_interval_s <= 0:
            raise ValueError("sync_interval_s must be positive")
        if self.sync_cycle_s <= 0 or self.read_through_fetch_s <= 0:
            raise ValueError("sync_cycle_s and read_through_fetch_s must be positive")
        if self.live_stall_s <= 0:
            raise ValueError("live_stall_s must be positive")
        if self.read_through_peer_fetches < 1:
            raise ValueError("read_through_peer_fetches must be >= 1")
        if self.reconcile_interval_s is not None and self.reconcile_interval_s <= 0:
            raise ValueError("reconcile_interval_s must be positive")
        if self.reconcile_follow_ons < 0:
            raise ValueError("reconcile_follow_ons must be >= 0")
        if self.reconcile_window_s <= 0 or self.reconcile_full_every < 1:
            raise ValueError("reconcile_window_s must be positive, reconcile_full_every >= 1")
        if self.fanout_direct_max < 0 or self.peer_discovery_max < 0:
            raise ValueError("fanout_direct_max and peer_discovery_max must be >= 0")
        if self.echo_memory_per_peer < 1 or self.fanout_forward_queue_max < 1:
            raise ValueError("echo_memory_per_peer and fanout_forward_queue_max must be >= 1")
        if self.peer_discovery_per_host < 1:
            raise ValueError("peer_discovery_per_host must be >= 1")
        if self.directory_refresh_s <= 0:
            raise ValueError("directory_refresh_s must be positive")
        if self.fanout_list_wait_s <= 0 or self.fanout_reread_s <= 0:
            raise ValueError("fanout_list_wait_s and fanout_reread_s must be positive")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PeeringConfig:
        """``DFOS_SYNC_INTERVAL_S`` and ``DFOS_SYNC_BUDGET_OPS`` from ``env``."""
        interval = env.get("DFOS_SYNC_INTERVAL_S")
        budget = env.get("DFOS_SYNC_BUDGET_OPS")
        return cls(
            sync_interval_s=float(interval) if interval else None,
            sync_budget_ops=int(budget) if budget else SYNC_BUDGET_OPS,
        )
