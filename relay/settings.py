"""Settings of ``dfos-relay serve`` and ``relay.asgi:app`` as data.

Every option has a command-line flag and an environment variable
``DFOS_RELAY_<NAME>``; the flag wins. Both sources are first merged into
one mapping of raw strings keyed by variable name (that mapping is also what
worker processes receive), then parsed into a frozen ``ServeSettings``. A
bad value raises ``SettingsError`` whose text is one line naming the flag or
variable it came from; ``dfos-relay`` prints it and exits 2.

Peer syntax: ``URL`` enables gossip, read-through and sync; ``URL#b1+b2``
enables only the listed behaviours, from ``gossip``, ``read-through`` and
``sync`` (``http://a:4444#read-through`` is a read-only cache).
``DFOS_RELAY_PEERS``, ``DFOS_RELAY_TRUSTED_PROXIES`` and
``DFOS_RELAY_CORS_ORIGINS`` are comma-separated.

Operators (``--admin-did``) and the write gate's lists (``--allow-did``,
``--deny-did``, ``--allow-kind``, ``--deny-kind``) are repeatable flags or
comma-separated variables. ``--write-policy module:function`` is imported
while the settings are parsed, so a bad one stops start-up in one line.

Not checked here: that the store or the peers are reachable (start-up and
``/readyz`` find out).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from peer.base import PeerConfig
from relay.config import (
    DEFAULT_ADMIN_TOKEN_MAX_LIFETIME_S,
    DEFAULT_AUTH_TOKEN_MAX_LIFETIME_S,
    DEFAULT_BODY_GRACE_S,
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_MAX_BLOB_BYTES,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_COPIES_PER_OP,
    DEFAULT_MAX_PENDING,
    DEFAULT_PARSE_QUEUE,
    DEFAULT_PURGE_STEP_OPS,
    DEFAULT_RECEIVE_BUDGET_BYTES,
    DEFAULT_SYNC_FRAME_LIMIT,
    DEFAULT_SYNC_MAX_MESSAGE_BYTES,
    RelayConfig,
)
from relay.ingest.policy import (
    DEFAULT_POLICY_RETRY_GIVE_UP_S,
    DEFAULT_POLICY_TIMEOUT_S,
    OP_KINDS,
    PolicyFunction,
    WritePolicy,
    load_policy_function,
)
from relay.limits import Network, RateLimit, parse_rate_limit, parse_trusted_proxies
from relay.observability.logging import DEFAULT_LOG_LEVEL, LOG_LEVELS
from relay.peering.config import (
    DIRECTORY_REFRESH_S,
    FANOUT_DIRECT_MAX,
    PEER_DISCOVERY_MAX,
    PEER_DISCOVERY_PER_HOST,
    RECONCILE_FULL_EVERY,
    RECONCILE_INTERVAL_S,
    RECONCILE_WINDOW_S,
    PeeringConfig,
)
from relay.protocol import is_dfos_did
from relay.protocol.untrusted import ascii_decimal
from relay.scope import Scope, load_scope_file, parse_scope

ENV_PREFIX = "DFOS_RELAY_"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4444
DEFAULT_STORE_URL = "sqlite:///dfos-relay.db"  # relative: ./dfos-relay.db
DEFAULT_WORKERS = 1
MAX_WORKERS = 64  # each worker is a process with its own pools: more is a typo, not a plan
DEFAULT_SYNC_INTERVAL_S = 30.0  # 0 turns periodic sync off
DEFAULT_GRACEFUL_TIMEOUT_S = 30.0  # in-flight requests get this long after SIGTERM
STORE_SCHEMES = ("memory", "sqlite", "postgresql", "postgres")
PEER_BEHAVIOURS = {
    "gossip": "gossip",
    "read-through": "read_through",
    "sync": "sync",
    "live": "live",  # opt-in: follow the peer's changes feed
    "reconcile": "reconcile",  # opt-in: periodic Negentropy reconciliation
}
DEFAULT_PEER_BEHAVIOURS = ("gossip", "read_through", "sync")
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


class SettingsError(ValueError):
    """A bad option value; ``str()`` is the one line shown to the operator."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source


@dataclass(frozen=True, slots=True)
class ServeSettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    store: str = DEFAULT_STORE_URL
    workers: int = DEFAULT_WORKERS
    content: bool = True
    log: bool = True
    peers: tuple[PeerConfig, ...] = ()
    sync_interval_s: float | None = DEFAULT_SYNC_INTERVAL_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES
    body_grace_s: float = DEFAULT_BODY_GRACE_S
    body_min_rate: int = DEFAULT_BODY_MIN_RATE
    receive_budget_bytes: int = DEFAULT_RECEIVE_BUDGET_BYTES
    max_pending: int = DEFAULT_MAX_PENDING
    max_copies_per_op: int = DEFAULT_MAX_COPIES_PER_OP
    parse_queue: int = DEFAULT_PARSE_QUEUE
    verify_threads: int | None = None  # None: one per core (relay.ingest.parallel)
    log_level: str = DEFAULT_LOG_LEVEL
    rate_limit: RateLimit | None = None
    trusted_proxies: tuple[Network, ...] = ()
    metrics_port: int | None = None  # None: /metrics on the main port
    feed_replay_window: int | None = None
    feed_max_subscribers: int = 1000
    feed_heartbeat_s: float = 15.0
    feed_send_timeout_s: float = 30.0
    cors_origins: tuple[str, ...] = ()  # CORS off unless origins are named
    reconcile_interval_s: float | None = RECONCILE_INTERVAL_S
    reconcile_window_s: float = RECONCILE_WINDOW_S
    reconcile_full_every: int = RECONCILE_FULL_EVERY
    sync_frame_limit: int = DEFAULT_SYNC_FRAME_LIMIT
    sync_max_message_bytes: int = DEFAULT_SYNC_MAX_MESSAGE_BYTES
    admin_dids: tuple[str, ...] = ()
    admin_token_max_lifetime_s: int = DEFAULT_ADMIN_TOKEN_MAX_LIFETIME_S
    purge_step_ops: int = DEFAULT_PURGE_STEP_OPS
    auth_token_max_lifetime_s: int = DEFAULT_AUTH_TOKEN_MAX_LIFETIME_S
    write_policy: tuple[str, PolicyFunction] | None = None  # (module:function, it)
    write_policy_timeout_s: float = DEFAULT_POLICY_TIMEOUT_S
    write_policy_give_up_s: float = DEFAULT_POLICY_RETRY_GIVE_UP_S
    allow_dids: tuple[str, ...] = ()
    deny_dids: tuple[str, ...] = ()
    allow_kinds: tuple[str, ...] = ()
    deny_kinds: tuple[str, ...] = ()
    scope: Scope | None = None  # mirror only this scope (with its closure) from pull peers
    scope_file: Scope | None = None  # the same, read from a file

    @property
    def mirrored_scope(self) -> Scope | None:
        return self.scope or self.scope_file

    fanout_direct_max: int = FANOUT_DIRECT_MAX
    peer_discovery: bool = False
    peer_discovery_max: int = PEER_DISCOVERY_MAX
    peer_discovery_per_host: int = PEER_DISCOVERY_PER_HOST
    peer_refresh_s: float = DIRECTORY_REFRESH_S

    def write_gate_policy(self) -> WritePolicy | None:
        lists = (self.allow_dids, self.deny_dids, self.allow_kinds, self.deny_kinds)
        if self.write_policy is None and not any(lists):
            return None
        name, function = self.write_policy or ("", None)
        return WritePolicy(
            function, name, self.write_policy_timeout_s,
            *(frozenset(values) for values in lists),
            retry_give_up_s=self.write_policy_give_up_s,
        )  # fmt: skip

    def relay_config(self) -> RelayConfig:
        return RelayConfig(
            content=self.content,
            log=self.log,
            max_body_bytes=self.max_body_bytes,
            max_blob_bytes=self.max_blob_bytes,
            body_grace_s=self.body_grace_s,
            body_min_rate=self.body_min_rate,
            receive_budget_bytes=self.receive_budget_bytes,
            max_pending=self.max_pending,
            max_copies_per_op=self.max_copies_per_op,
            parse_queue=self.parse_queue,
            verify_threads=self.verify_threads,
            rate_limit=self.rate_limit,
            trusted_proxies=self.trusted_proxies,
            metrics_port=self.metrics_port,
            feed_replay_window=self.feed_replay_window,
            feed_max_subscribers=self.feed_max_subscribers,
            feed_heartbeat_s=self.feed_heartbeat_s,
            feed_send_timeout_s=self.feed_send_timeout_s,
            cors_origins=self.cors_origins,
            sync_frame_limit=self.sync_frame_limit,
            sync_max_message_bytes=self.sync_max_message_bytes,
            admin_dids=self.admin_dids,
            admin_token_max_lifetime_s=self.admin_token_max_lifetime_s,
            purge_step_ops=self.purge_step_ops,
            auth_token_max_lifetime_s=self.auth_token_max_lifetime_s,
            write_policy=self.write_gate_policy(),
        )

    def peering_config(self) -> PeeringConfig:
        return PeeringConfig(
            sync_interval_s=self.sync_interval_s,
            reconcile_interval_s=self.reconcile_interval_s,
            reconcile_window_s=self.reconcile_window_s,
            reconcile_full_every=self.reconcile_full_every,
            scope=self.mirrored_scope,
            fanout_direct_max=self.fanout_direct_max,
            peer_discovery=self.peer_discovery,
            peer_discovery_max=self.peer_discovery_max,
            peer_discovery_per_host=self.peer_discovery_per_host,
            directory_refresh_s=self.peer_refresh_s,
        )


# -- value parsers: text -> value, or ValueError with a short reason ------------


def _int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = text.strip()
        number = ascii_decimal(value)
        if number is None or number < low or (high is not None and number > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            raise ValueError(f"expected an integer {bound}, got {text!r}")
        return number

    return parse


def _bool(text: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"expected true/false (1/0, yes/no, on/off), got {text!r}")


def _host(text: str) -> str:
    if not text.strip() or any(c.isspace() for c in text.strip()):
        raise ValueError(f"expected a host name or address, got {text!r}")
    return text.strip()


def _store(text: str) -> str:
    url = text.strip()
    try:
        scheme = urlsplit(url).scheme
    except ValueError as exc:  # a broken [IPv6] host, say
        raise ValueError(f"store URL {text!r} is malformed: {exc}") from None
    if scheme not in STORE_SCHEMES or "://" not in url:
        raise ValueError(
            f"expected memory://, sqlite:///PATH or postgresql://USER@HOST:PORT/DB, got {text!r}"
        )
    return url


def _interval(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected seconds (0 turns sync off), got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected seconds >= 0 (0 turns sync off), got {text!r}")
    return value or None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected seconds > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"expected seconds > 0, got {text!r}")
    return value


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``24h`` or ``7d``."""
    raw = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(raw[-1:])
    number = raw[:-1] if scale is not None else raw
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        raise ValueError(f"expected a duration like 90s, 15m, 24h or 7d, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"expected a positive duration, got {text!r}")
    return value


def _frame_limit(text: str) -> int:
    value = _int_in(0)(text)
    if 0 < value < 4096:
        raise ValueError(f"expected 0 (no limit) or at least 4096 bytes, got {text!r}")
    return value


def _log_level(text: str) -> str:
    if text.strip().lower() not in LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}, got {text!r}")
    return text.strip().lower()


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_peer(spec: str) -> PeerConfig:
    """``URL`` or ``URL#gossip+read-through+sync`` (only the listed behaviours)."""
    url, hashmark, fragment = spec.strip().partition("#")
    flags = {field: field in DEFAULT_PEER_BEHAVIOURS for field in PEER_BEHAVIOURS.values()}
    if hashmark:
        names = [name for name in fragment.split("+") if name]
        unknown = [name for name in names if name not in PEER_BEHAVIOURS]
        if not names or unknown:
            raise ValueError(
                f"peer {spec!r}: behaviours after '#' must be '+'-joined "
                f"{', '.join(PEER_BEHAVIOURS)}"
            )
        flags = {field: name in names for name, field in PEER_BEHAVIOURS.items()}
    return PeerConfig(url, **flags)


def _scope(text: str) -> Scope:
    return parse_scope(text)  # ScopeError is a ValueError with a one-line reason


def _scope_file(text: str) -> Scope:
    return load_scope_file(text.strip())


def _peers(text: str) -> tuple[PeerConfig, ...]:
    peers = tuple(parse_peer(item) for item in _items(text))
    urls = [peer.url for peer in peers]
    if len(set(urls)) != len(urls):
        raise ValueError("a peer url is listed more than once")
    return peers


def _proxies(text: str) -> tuple[Network, ...]:
    return parse_trusted_proxies(_items(text))


def parse_origin(text: str) -> str:
    """``*`` or a browser origin ``http(s)://host[:port]`` (no path, query or fragment)."""
    origin = text.strip()
    if origin == "*":
        return origin
    try:
        parts = urlsplit(origin)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if (
        not port_ok
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
    ):
        raise ValueError(f"expected * or an origin like https://app.example:8080, got {text!r}")
    return origin


def _origins(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(parse_origin(item) for item in _items(text)))


def _dids(text: str) -> tuple[str, ...]:
    dids = tuple(dict.fromkeys(_items(text)))
    bad = [did for did in dids if not is_dfos_did(did)]
    if bad:
        raise ValueError(f"expected did:dfos DIDs, got {bad[0]!r}")
    return dids


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(_items(text)))
    bad = [kind for kind in kinds if kind not in OP_KINDS]
    if bad:
        raise ValueError(f"expected kinds among {', '.join(OP_KINDS)}, got {bad[0]!r}")
    return kinds


def _policy(text: str) -> tuple[str, PolicyFunction]:
    return text.strip(), load_policy_function(text)


# -- the option table --------------------------------------------------------------

Kind = Literal["value", "flag", "list"]


@dataclass(frozen=True, slots=True)
class Option:
    field: str  # ServeSettings field
    flag: str
    name: str  # DFOS_RELAY_<name>
    kind: Kind
    parse: Callable[[str], Any]
    help: str
    metavar: str = "VALUE"  # what the flag takes, as --help shows it

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name


OPTIONS: tuple[Option, ...] = (
    Option(
        "host", "--host", "HOST", "value", _host, f"bind address (default {DEFAULT_HOST})", "HOST"
    ),
    Option(
        "port",
        "--port",
        "PORT",
        "value",
        _int_in(1, 65535),
        f"TCP port (default {DEFAULT_PORT})",
        "PORT",
    ),
    Option(
        "store",
        "--store",
        "STORE",
        "value",
        _store,
        f"memory://, sqlite:///PATH or postgresql://USER@HOST:PORT/DB "
        f"(default {DEFAULT_STORE_URL})",
        "URL",
    ),
    Option(
        "workers",
        "--workers",
        "WORKERS",
        "value",
        _int_in(1, MAX_WORKERS),
        f"hypercorn worker processes, 1..{MAX_WORKERS} (default 1; >1 needs a shared store)",
        "N",
    ),
    Option(
        "content",
        "--no-content",
        "NO_CONTENT",
        "flag",
        lambda t: not _bool(t),
        "disable the content plane",
    ),
    Option(
        "log",
        "--no-log",
        "NO_LOG",
        "flag",
        lambda t: not _bool(t),
        "disable the global operation log",
    ),
    Option(
        "peers",
        "--peer",
        "PEERS",
        "list",
        _peers,
        "peer URL, repeatable; URL#gossip+read-through+sync+live+reconcile enables only those",
        "URL[#behaviours]",
    ),
    Option(
        "scope",
        "--scope",
        "SCOPE",
        "list",
        _scope,
        "mirror only these DIDs and contentIds (comma-separated, repeatable) from the "
        "live/sync/reconcile peers, with their dependency closure",
        "MEMBERS",
    ),
    Option(
        "scope_file",
        "--scope-file",
        "SCOPE_FILE",
        "value",
        _scope_file,
        "the same scope read from a file (JSON or one member per line)",
        "FILE",
    ),
    Option(
        "sync_interval_s",
        "--sync-interval",
        "SYNC_INTERVAL",
        "value",
        _interval,
        f"seconds between sync-in cycles (default {DEFAULT_SYNC_INTERVAL_S:g}; 0: off)",
        "SECONDS",
    ),
    Option(
        "max_body_bytes",
        "--max-body-bytes",
        "MAX_BODY_BYTES",
        "value",
        _int_in(1),
        f"request body cap, 413 beyond (default {DEFAULT_MAX_BODY_BYTES})",
        "BYTES",
    ),
    Option(
        "max_blob_bytes",
        "--max-blob-bytes",
        "MAX_BLOB_BYTES",
        "value",
        _int_in(1),
        f"blob upload cap (default {DEFAULT_MAX_BLOB_BYTES})",
        "BYTES",
    ),
    Option(
        "body_grace_s",
        "--body-grace",
        "BODY_GRACE",
        "value",
        _seconds,
        "a request body may take this long to start arriving, then fall this far"
        f" behind the minimum rate; 408 beyond (default {DEFAULT_BODY_GRACE_S:g})",
        "SECONDS",
    ),
    Option(
        "body_min_rate",
        "--body-min-rate",
        "BODY_MIN_RATE",
        "value",
        _int_in(1),
        "the minimum rate of a request body, bytes a second; sending faster banks"
        f" at most the grace (default {DEFAULT_BODY_MIN_RATE})",
        "BYTES",
    ),
    Option(
        "receive_budget_bytes",
        "--receive-budget",
        "RECEIVE_BUDGET",
        "value",
        _int_in(1),
        "bytes of request bodies being received at once (each holds what it received; "
        "one that does not fit is answered 503, one of at most 64 KiB never is; "
        f"default {DEFAULT_RECEIVE_BUDGET_BYTES})",
        "BYTES",
    ),
    Option(
        "max_pending",
        "--max-pending",
        "MAX_PENDING",
        "value",
        _int_in(1),
        "ops kept waiting for a dependency, copies included; one more is answered "
        f"buffer-full (default {DEFAULT_MAX_PENDING})",
        "N",
    ),
    Option(
        "max_copies_per_op",
        "--max-copies-per-op",
        "MAX_COPIES_PER_OP",
        "value",
        _int_in(0),
        "other tokens of a waiting op's CID kept beside it; one more is answered "
        f"buffer-full (default {DEFAULT_MAX_COPIES_PER_OP})",
        "N",
    ),
    Option(
        "parse_queue",
        "--parse-queue",
        "PARSE_QUEUE",
        "value",
        _int_in(1),
        "costly request bodies (many JSON values) waiting for the parse child, and "
        "document uploads for their check; one more is answered 503 "
        f"(default {DEFAULT_PARSE_QUEUE})",
        "N",
    ),
    Option(
        "verify_threads",
        "--verify-threads",
        "VERIFY_THREADS",
        "value",
        _int_in(1, 64),
        "threads checking signatures ahead of sequencing (default: one per core, up to 8)",
        "N",
    ),
    Option(
        "log_level",
        "--log-level",
        "LOG_LEVEL",
        "value",
        _log_level,
        f"{'/'.join(LOG_LEVELS)} (default {DEFAULT_LOG_LEVEL})",
        "LEVEL",
    ),
    Option(
        "rate_limit",
        "--rate-limit",
        "RATE_LIMIT",
        "value",
        parse_rate_limit,
        "POST /operations per client IP (IPv6: per /64): N/s, N/m or N/h, or off (default off)",
        "RATE",
    ),
    Option(
        "trusted_proxies",
        "--trusted-proxy",
        "TRUSTED_PROXIES",
        "list",
        _proxies,
        "proxy IP/CIDR whose X-Forwarded-For is believed, repeatable",
        "IP/CIDR",
    ),
    Option(
        "metrics_port",
        "--metrics-port",
        "METRICS_PORT",
        "value",
        _int_in(1, 65535),
        "serve /metrics on this port only, apart from the API (default: the main port)",
        "PORT",
    ),
    Option(
        "feed_replay_window",
        "--feed-replay-window",
        "FEED_REPLAY_WINDOW",
        "value",
        _int_in(1),
        "changes feed: keep only the last N log entries replayable (default: all)",
        "N",
    ),
    Option(
        "feed_max_subscribers",
        "--feed-max-subscribers",
        "FEED_MAX_SUBSCRIBERS",
        "value",
        _int_in(1),
        "changes feed: subscriptions per worker before 503 (default 1000)",
        "N",
    ),
    Option(
        "feed_heartbeat_s",
        "--feed-heartbeat",
        "FEED_HEARTBEAT",
        "value",
        _seconds,
        "changes feed: seconds between SSE heartbeats and WebSocket pings when idle (default 15)",
        "SECONDS",
    ),
    Option(
        "feed_send_timeout_s",
        "--feed-send-timeout",
        "FEED_SEND_TIMEOUT",
        "value",
        _seconds,
        "changes feed: close a subscriber unwritable this long (default 30)",
        "SECONDS",
    ),
    Option(
        "cors_origins",
        "--cors-origin",
        "CORS_ORIGINS",
        "list",
        _origins,
        "allow browser clients from this origin (CORS), repeatable; * allows any (default: off)",
        "ORIGIN",
    ),
    Option(
        "reconcile_interval_s",
        "--reconcile-interval",
        "RECONCILE_INTERVAL",
        "value",
        _interval,
        f"seconds between reconcile runs per #reconcile peer (default {RECONCILE_INTERVAL_S:g};"
        " 0: only after start and after gaps)",
        "SECONDS",
    ),
    Option(
        "reconcile_window_s",
        "--reconcile-window",
        "RECONCILE_WINDOW",
        "value",
        parse_duration,
        "periodic reconcile runs cover this much recent createdAt, e.g. 24h (default 24h)",
        "DURATION",
    ),
    Option(
        "reconcile_full_every",
        "--reconcile-full-every",
        "RECONCILE_FULL_EVERY",
        "value",
        _int_in(1),
        f"every Nth periodic reconcile run covers everything (default {RECONCILE_FULL_EVERY})",
        "N",
    ),
    Option(
        "sync_frame_limit",
        "--sync-frame-limit",
        "SYNC_FRAME_LIMIT",
        "value",
        _frame_limit,
        f"cap on our Negentropy replies; 0: none, else >= 4096"
        f" (default {DEFAULT_SYNC_FRAME_LIMIT})",
        "BYTES",
    ),
    Option(
        "sync_max_message_bytes",
        "--sync-max-message-bytes",
        "SYNC_MAX_MESSAGE_BYTES",
        "value",
        _int_in(1),
        f"Negentropy query cap, 413 beyond (default {DEFAULT_SYNC_MAX_MESSAGE_BYTES})",
        "BYTES",
    ),
    Option(
        "admin_dids", "--admin-did", "ADMIN_DIDS", "list", _dids,
        "operator DID allowed to call /admin/ with an admin token (a DID auth token with "
        "aud <relay DID>#admin), repeatable",
        "DID",
    ),
    Option(
        "admin_token_max_lifetime_s", "--admin-token-max-lifetime", "ADMIN_TOKEN_MAX_LIFETIME",
        "value", _int_in(1),
        f"longest exp - iat of an admin auth token (default {DEFAULT_ADMIN_TOKEN_MAX_LIFETIME_S})",
        "SECONDS",
    ),
    Option(
        "purge_step_ops", "--purge-step-ops", "PURGE_STEP_OPS", "value", _int_in(1),
        f"ops a purge removes per locked step (default {DEFAULT_PURGE_STEP_OPS})",
        "N",
    ),
    Option(
        "auth_token_max_lifetime_s", "--auth-token-max-lifetime", "AUTH_TOKEN_MAX_LIFETIME",
        "value", _int_in(0),
        "longest exp - iat of a content-plane auth token; 0: any, as long as it has not "
        f"expired (default {DEFAULT_AUTH_TOKEN_MAX_LIFETIME_S})",
        "SECONDS",
    ),
    Option(
        "write_policy", "--write-policy", "WRITE_POLICY", "value", _policy,
        "a function called on each verified op before commit: accept, or refuse with a reason",
        "MODULE:FUNCTION",
    ),
    Option(
        "write_policy_timeout_s", "--write-policy-timeout", "WRITE_POLICY_TIMEOUT", "value",
        _seconds, f"seconds the write policy may take per round of ops before 'policy error' "
        f"(default {DEFAULT_POLICY_TIMEOUT_S:g})", "SECONDS",
    ),
    Option(
        "write_policy_give_up_s", "--write-policy-give-up", "WRITE_POLICY_GIVE_UP", "value",
        _seconds, "seconds a buffered op the write policy keeps failing on is retried before "
        f"it is rejected (default {DEFAULT_POLICY_RETRY_GIVE_UP_S:g})", "SECONDS",
    ),
    Option(
        "allow_dids", "--allow-did", "ALLOW_DIDS", "list", _dids,
        "accept ops only from these signers, repeatable (default: all)", "DID",
    ),
    Option(
        "deny_dids", "--deny-did", "DENY_DIDS", "list", _dids,
        "refuse ops from this signer, repeatable", "DID",
    ),
    Option(
        "allow_kinds", "--allow-kind", "ALLOW_KINDS", "list", _kinds,
        f"accept only these kinds ({', '.join(OP_KINDS)}), repeatable", "KIND",
    ),
    Option(
        "deny_kinds", "--deny-kind", "DENY_KINDS", "list", _kinds,
        "refuse ops of this kind, repeatable", "KIND",
    ),
    Option(
        "fanout_direct_max", "--fanout-direct-max", "FANOUT_DIRECT_MAX", "value", _int_in(0),
        f"up to this many gossip peers, push every op to each; above, rendezvous fan-out"
        f" (default {FANOUT_DIRECT_MAX})", "N",
    ),
    Option(
        "peer_discovery", "--peer-discovery", "PEER_DISCOVERY", "flag", _bool,
        "learn the peers our peers advertise (well-known 'peers') as gossip peers",
    ),
    Option(
        "peer_discovery_max", "--peer-discovery-max", "PEER_DISCOVERY_MAX", "value", _int_in(0),
        f"at most this many learned peers (default {PEER_DISCOVERY_MAX})", "N",
    ),
    Option(
        "peer_discovery_per_host", "--peer-discovery-per-host", "PEER_DISCOVERY_PER_HOST",
        "value", _int_in(1),
        f"learn a peer only on a host name with fewer peers than this, configured ones"
        f" included, whatever the port or path (default {PEER_DISCOVERY_PER_HOST})", "N",
    ),
    Option(
        "peer_refresh_s", "--peer-refresh", "PEER_REFRESH", "value", parse_duration,
        f"re-read peers' well-known documents (DID, peers) this often"
        f" (default {DIRECTORY_REFRESH_S:g}s)", "DURATION",
    ),
)  # fmt: skip


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option as a flag; values stay raw text until ``load_settings``."""
    for opt in OPTIONS:
        env_help = f" [env {opt.env}]"
        if opt.kind == "flag":
            parser.add_argument(
                opt.flag,
                dest=opt.field,
                action="store_const",
                const="1",
                default=None,
                help=opt.help + env_help,
            )
        elif opt.kind == "list":
            parser.add_argument(
                opt.flag,
                dest=opt.field,
                action="append",
                default=None,
                metavar=opt.metavar,
                help=opt.help + env_help,
            )
        else:
            parser.add_argument(
                opt.flag,
                dest=opt.field,
                default=None,
                metavar=opt.metavar,
                help=opt.help + env_help,
            )


def merge_sources(
    args: argparse.Namespace | None, env: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """(raw values by variable name, the source to blame for each)."""
    raw: dict[str, str] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        given = getattr(args, opt.field, None) if args is not None else None
        if given is not None:
            raw[opt.env] = ",".join(given) if isinstance(given, list) else str(given)
            sources[opt.env] = opt.flag
        elif opt.env in env:
            raw[opt.env] = env[opt.env]
            sources[opt.env] = opt.env
    return raw, sources


def parse_settings(
    raw: Mapping[str, str], sources: Mapping[str, str] | None = None
) -> ServeSettings:
    """``ServeSettings`` from ``DFOS_RELAY_*`` text; raises ``SettingsError``."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        if opt.env not in raw:
            continue
        source = (sources or {}).get(opt.env, opt.env)
        try:
            values[opt.field] = opt.parse(raw[opt.env])
        except ValueError as exc:
            raise SettingsError(source, str(exc)) from None
    settings = ServeSettings(**values)
    if settings.workers > 1 and settings.store.startswith("memory:"):
        source = (sources or {}).get(ENV_PREFIX + "WORKERS", ENV_PREFIX + "WORKERS")
        raise SettingsError(source, "several workers need a shared store, not memory://")
    if settings.scope is not None and settings.scope_file is not None:
        source = (sources or {}).get(ENV_PREFIX + "SCOPE_FILE", ENV_PREFIX + "SCOPE_FILE")
        raise SettingsError(source, "give the scope with --scope or --scope-file, not both")
    if settings.mirrored_scope is not None and not any(
        p.live or p.sync or p.reconcile for p in settings.peers
    ):
        name = "SCOPE" if settings.scope is not None else "SCOPE_FILE"
        source = (sources or {}).get(ENV_PREFIX + name, ENV_PREFIX + name)
        raise SettingsError(
            source, "a scope needs a peer to mirror it from (#live, #sync or #reconcile)"
        )
    caps = (settings.max_body_bytes, settings.max_blob_bytes, settings.sync_max_message_bytes)
    if settings.receive_budget_bytes < max(caps):
        # a body that size would be received only while no other arrives
        budget = ENV_PREFIX + "RECEIVE_BUDGET"
        default = f"--receive-budget (default {DEFAULT_RECEIVE_BUDGET_BYTES})"
        source = (sources or {}).get(budget, budget) if budget in raw else default
        raise SettingsError(source, f"must be at least the largest body cap, {max(caps)} bytes")
    if settings.metrics_port is not None and settings.metrics_port == settings.port:
        source = (sources or {}).get(ENV_PREFIX + "METRICS_PORT", ENV_PREFIX + "METRICS_PORT")
        port = ENV_PREFIX + "PORT"
        port_source = (sources or {}).get(port, port) if port in raw else "the default port"
        raise SettingsError(
            source, f"the metrics port must differ from {port_source} ({settings.port})"
        )
    return settings


def load_settings(args: argparse.Namespace | None, env: Mapping[str, str]) -> ServeSettings:
    raw, sources = merge_sources(args, env)
    return parse_settings(raw, sources)


__all__: Sequence[str] = [
    "DEFAULT_GRACEFUL_TIMEOUT_S",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_STORE_URL",
    "ENV_PREFIX",
    "MAX_WORKERS",
    "OPTIONS",
    "ServeSettings",
    "SettingsError",
    "add_serve_arguments",
    "load_settings",
    "merge_sources",
    "parse_peer",
    "parse_settings",
]
