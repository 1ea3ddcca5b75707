"""Relay configuration as data: every default and limit is a named constant."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relay.ingest.policy import WritePolicy
    from relay.limits import Network, RateLimit

MAX_OPERATIONS_PER_REQUEST = 100  # openapi.yaml: operations maxItems
DEFAULT_LOG_LIMIT = 100
MAX_LOG_LIMIT = 1000
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_BLOB_BYTES = 16 * 1024 * 1024
# The request-body deadline (408 past it): a body may take this long to start
# arriving, and must then average this many bytes a second, never falling
# more than the grace behind; sending faster banks at most the grace
# (hypercorn bounds slow headers, not slow bodies: a trickled body would
# hold its connection, and its bytes in the receive budget).
DEFAULT_BODY_GRACE_S = 10.0
DEFAULT_BODY_MIN_RATE = 1024
# Bytes of request bodies being received at once, relay-wide (503 beyond:
# relay.receive_budget): four uploads at the blob cap, or sixteen bodies at
# the body cap; ordinary batches (~75 KiB) rarely hold a megabyte together
DEFAULT_RECEIVE_BUDGET_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_PENDING = 100_000
# A purge removes this many ops per step under the sequencing lock, then lets
# ingestion in (relay.admin.purge_steps): about 0.1 s a step on SQLite/Postgres
DEFAULT_PURGE_STEP_OPS = 2000
# Costly bodies admitted to the parse child at once (relay.parse_pool), and
# document uploads to their checks: 8 x 4 MiB of operations bodies is about
# a second of parsing at the cap; an honest client sends none of either kind
DEFAULT_PARSE_QUEUE = 8
# Other tokens of one waiting op's CID kept beside it (copies); only the
# signer can make more tokens that verify, so a few cover every honest case.
DEFAULT_MAX_COPIES_PER_OP = 8
DEFAULT_MAX_REJECTION_NOTES = 100_000  # recent rejections remembered by CID (op status)
DEFAULT_SYNC_FRAME_LIMIT = 512 * 1024
DEFAULT_SYNC_MAX_MESSAGE_BYTES = 1024 * 1024
# Auth tokens are "short-lived, typically minutes" (PROTOCOL.md): a day bounds
# what a leaked one is worth; 0 lifts the bound (the spec's checks only)
DEFAULT_AUTH_TOKEN_MAX_LIFETIME_S = 24 * 3600
DEFAULT_ADMIN_TOKEN_MAX_LIFETIME_S = 300  # admin tokens are short-lived: the replay window
PROFILE_SCHEMA = "https://schemas.dfos.com/profile/v1"
DEFAULT_PROFILE: Mapping[str, Any] = MappingProxyType(
    {"name": "dfos-relay", "description": "A DFOS web relay"}
)


@dataclass(frozen=True, slots=True)
class RelayConfig:
    content: bool = True
    log: bool = True
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES
    body_grace_s: float = DEFAULT_BODY_GRACE_S  # the body deadline: grace ...
    body_min_rate: int = DEFAULT_BODY_MIN_RATE  # ... plus 1 s per this many bytes, <= grace ahead
    receive_budget_bytes: int = DEFAULT_RECEIVE_BUDGET_BYTES  # bodies arriving at once; 503 beyond
    max_pending: int = DEFAULT_MAX_PENDING
    max_copies_per_op: int = DEFAULT_MAX_COPIES_PER_OP
    parse_queue: int = DEFAULT_PARSE_QUEUE  # costly bodies waiting for the parse child; 503 beyond
    max_rejection_notes: int = DEFAULT_MAX_REJECTION_NOTES
    verify_threads: int | None = None  # precheck threads; None: one per core (up to 8)
    auth_token_max_lifetime_s: int = DEFAULT_AUTH_TOKEN_MAX_LIFETIME_S
    profile: Mapping[str, Any] = field(default_factory=lambda: DEFAULT_PROFILE)
    rate_limit: RateLimit | None = None  # POST /operations per client IP; None: off
    trusted_proxies: tuple[Network, ...] = ()  # whose X-Forwarded-For is believed
    metrics_port: int | None = None  # set: /metrics answers on this local port only
    cors_origins: tuple[str, ...] = ()  # browser origins allowed by CORS; "*": any; (): off
    # the changes feed (relay.feed.FeedConfig)
    feed_replay_window: int | None = None  # keep the last N entries replayable; None: all
    feed_max_subscribers: int = 1000
    feed_heartbeat_s: float = 15.0
    feed_send_timeout_s: float = 30.0
    # reconciliation (relay.reconcile)
    sync_frame_limit: int = DEFAULT_SYNC_FRAME_LIMIT  # our Negentropy reply cap; 0: none
    sync_max_message_bytes: int = DEFAULT_SYNC_MAX_MESSAGE_BYTES  # a bigger query is a 413
    # administration (relay.admin) and the write gate (relay.ingest.policy)
    admin_dids: tuple[str, ...] = ()  # operators; none: /admin/ answers 501
    admin_token_max_lifetime_s: int = DEFAULT_ADMIN_TOKEN_MAX_LIFETIME_S
    purge_step_ops: int = DEFAULT_PURGE_STEP_OPS
    write_policy: WritePolicy | None = None  # None: only bans apply
