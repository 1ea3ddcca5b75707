"""Peer configuration, the ``PeerClient`` protocol and its error tree
(WEB-RELAY.md "Peer Configuration", "PeerClient Interface").

Errors a peer client raises (never a silent ``None`` for a failure)::

    PeerError                      any failure talking to one peer (.peer_url)
    ├── PeerUnreachable            connection refused / DNS / reset
    ├── PeerTimeout                connect or read timed out
    ├── PeerBadStatus              non-2xx answer (.status)
    │   └── PeerBusy               503/429 with Retry-After (.retry_after_s): come back later
    ├── PeerMalformedPage          body is not the documented JSON shape
    │   └── PeerResponseTooLarge   body exceeded the client's size cap
    └── PeerInvalidOperations      well-formed page whose ops do not verify
                                   (raised by the peering logic, not the client)

The only ``None`` is a chain log the peer answers 404 for: "the peer does
not know this chain" is an answer, not a failure.

Page validation here is *shape only*: tokens are not decoded or verified
(the ingest pipeline does that), and a peer's cursor is passed back to that
same peer verbatim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit


class PeerError(Exception):
    """A failure talking to ``peer_url``."""

    def __init__(self, peer_url: str, message: str) -> None:
        super().__init__(f"{peer_url}: {message}")
        self.peer_url = peer_url


class PeerUnreachable(PeerError):
    pass


class PeerTimeout(PeerError):
    pass


class PeerBadStatus(PeerError):
    def __init__(self, peer_url: str, status: int, message: str = "") -> None:
        super().__init__(peer_url, f"HTTP {status} {message}".rstrip())
        self.status = status


class PeerBusy(PeerBadStatus):
    """The peer refused for want of room now (503 or 429 with ``Retry-After``,
    its own bound on work at once), not for a fault: it asks to be tried again
    after ``retry_after_s``. Raised only where a caller can wait (the sync
    routes); elsewhere such an answer stays a ``PeerBadStatus``."""

    def __init__(self, peer_url: str, status: int, retry_after_s: int, message: str = "") -> None:
        super().__init__(peer_url, status, f"(busy, retry after {retry_after_s}s) {message}")
        self.retry_after_s = retry_after_s


class PeerMalformedPage(PeerError):
    pass


class PeerResponseTooLarge(PeerMalformedPage):
    pass


class PeerInvalidOperations(PeerError):
    pass


# -- configuration --------------------------------------------------------------


def normalize_peer_url(url: str) -> str:
    """``scheme://host[:port][/path]`` without a trailing slash; raises ValueError."""
    try:
        parts = urlsplit(url.strip())
        port_ok = parts.port != 0  # raises on a port beyond 0..65535 or not a number
    except ValueError:  # and on a malformed host ('http://[::1')
        parts, port_ok = urlsplit(""), False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ValueError(f"peer url must be http(s)://host[:port][/path], got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"peer url must not carry a query or fragment: {url!r}")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


@dataclass(frozen=True, slots=True)
class PeerConfig:
    """One peer and which of the three behaviors apply to it (all default on).

    gossip only -> write-only edge; read_through only -> read-only cache;
    all three -> full mirror. Topology emerges from these flags.
    """

    url: str
    gossip: bool = True
    read_through: bool = True
    sync: bool = True
    live: bool = False  # follow the peer's changes feed (opt-in; additive)
    reconcile: bool = False  # periodic range-based reconciliation (opt-in; additive)

    def __post_init__(self) -> None:
        url = normalize_peer_url(self.url)
        userinfo, at, host = urlsplit(url).netloc.rpartition("@")
        if at:  # the relay shows its peers' URLs: well-known ``peers``, /metrics, logs
            hidden = url.replace(f"{userinfo}@{host}", f"***@{host}", 1)
            raise ValueError(f"peer url must not carry credentials (relays publish them): {hidden}")
        object.__setattr__(self, "url", url)


_FLAG_KEYS = {
    "gossip": "gossip",
    "readThrough": "read_through",
    "read_through": "read_through",
    "sync": "sync",
    "live": "live",
    "reconcile": "reconcile",
}


def parse_peer_config(value: object) -> PeerConfig:
    """A ``PeerConfig`` from a URL string, a ``PeerConfig``, or the spec's
    ``{url, gossip?, readThrough?, sync?}`` mapping (snake_case accepted)."""
    if isinstance(value, PeerConfig):
        return value
    if isinstance(value, str):
        return PeerConfig(value)
    if isinstance(value, Mapping):
        url = value.get("url")
        if not isinstance(url, str):
            raise ValueError("peer config needs a string 'url'")
        flags: dict[str, bool] = {}
        for key, item in value.items():
            if key == "url":
                continue
            if key not in _FLAG_KEYS:
                raise ValueError(f"unknown peer config key {key!r}")
            if not isinstance(item, bool):
                raise ValueError(f"peer config {key!r} must be a boolean")
            flags[_FLAG_KEYS[key]] = item
        return PeerConfig(url, **flags)
    raise ValueError(f"cannot read a peer config from {type(value).__name__}")


def parse_peer_configs(values: Iterable[object]) -> tuple[PeerConfig, ...]:
    """Parse every peer; a URL listed twice is a configuration error."""
    peers = tuple(parse_peer_config(v) for v in values)
    urls = [p.url for p in peers]
    if len(set(urls)) != len(urls):
        raise ValueError("a peer url is listed more than once")
    return peers


# -- the client seam ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerLogEntry:
    cid: str
    jws_token: str


@dataclass(frozen=True, slots=True)
class SubmitResult:
    """One result of a peer's ``POST /operations`` answer: its ``status``
    ("new", "duplicate", "rejected"; "" when it named none) and, from our
    relays, its reject ``reason`` (additive). The peer's word only."""

    status: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PeerLogPage:
    entries: tuple[PeerLogEntry, ...]
    cursor: str | None
    # The peer said our ``after`` means nothing to it (its store was rebuilt,
    # or it never issued that cursor): an empty page that is not "caught up".
    cursor_unknown: bool = False
    # A scoped page (additive): the last entry the peer scanned, where a
    # poller resumes when ``cursor`` is null.
    scanned_to: str | None = None


def parse_log_page(peer_url: str, data: Any, limit: int) -> PeerLogPage:
    """Shape-check a ``{entries: [{cid, jwsToken}], cursor}`` page."""
    if not isinstance(data, dict):
        raise PeerMalformedPage(peer_url, "log page is not a JSON object")
    raw_entries, cursor = data.get("entries"), data.get("cursor")
    if not isinstance(raw_entries, list):
        raise PeerMalformedPage(peer_url, "log page 'entries' is not an array")
    # closure ops of a scoped page (flagged) come on top of the limit
    in_order = sum(1 for e in raw_entries if not (isinstance(e, dict) and e.get("closure") is True))
    if in_order > limit:
        raise PeerMalformedPage(peer_url, f"{in_order} entries > limit {limit}")
    if cursor is not None and (not isinstance(cursor, str) or not cursor):
        raise PeerMalformedPage(peer_url, "log page 'cursor' is neither a string nor null")
    _check_position(peer_url, "cursor", cursor)
    entries = []
    for item in raw_entries:
        if not isinstance(item, dict):
            raise PeerMalformedPage(peer_url, "log entry is not an object")
        cid, token = item.get("cid"), item.get("jwsToken")
        if not isinstance(cid, str) or not isinstance(token, str) or not cid or not token:
            raise PeerMalformedPage(peer_url, "log entry lacks string 'cid'/'jwsToken'")
        entries.append(PeerLogEntry(cid, token))
    unknown = data.get(UNKNOWN_CURSOR_FIELD) is True
    scanned = data.get("scannedTo")
    scanned_to = scanned if isinstance(scanned, str) and scanned else None
    _check_position(peer_url, "scannedTo", scanned_to)
    return PeerLogPage(tuple(entries), cursor, cursor_unknown=unknown, scanned_to=scanned_to)


# A log position is a CID (WEB-RELAY.md, "cursor"); none is this long.
MAX_POSITION_CHARS = 256


def _check_position(peer_url: str, field: str, value: str | None) -> None:
    """A position the relay will store (as the peer's cursor) and send back:
    bounded, and without NUL, which a Postgres text column cannot hold."""
    if value is not None and (len(value) > MAX_POSITION_CHARS or "\x00" in value):
        raise PeerMalformedPage(peer_url, f"log page '{field}' is not a log position")


class PeerClient(Protocol):
    """Semantic per-resource calls to a peer; raises ``PeerError`` subclasses."""

    async def get_identity_log(
        self, peer_url: str, did: str, after: str | None = None, limit: int | None = None
    ) -> PeerLogPage | None:
        """One page of the identity's chain log; ``None`` if the peer has no such chain."""
        ...

    async def get_content_log(
        self, peer_url: str, content_id: str, after: str | None = None, limit: int | None = None
    ) -> PeerLogPage | None:
        """One page of the content chain log; ``None`` if the peer has no such chain."""
        ...

    async def get_operation_log(
        self,
        peer_url: str,
        after: str | None = None,
        limit: int | None = None,
        scope: str | None = None,
    ) -> PeerLogPage:
        """One page of the peer's global log (of a scope's, when ``scope`` is a
        ``scope=`` query value)."""
        ...

    async def submit_operations(
        self,
        peer_url: str,
        operations: Sequence[str],
        headers: Mapping[str, str] | None = None,
    ) -> list[SubmitResult]:
        """POST /operations (at most 100 tokens); ``headers`` carry the relay
        push headers below (sender, hop). One result per token, as the peer
        put it."""
        ...

    async def aclose(self) -> None: ...


# Sent on read-through fetches: the serving relay must answer from local state
# only. Without it two relays that read through each other would wait on each
# other's single-flight for the same chain until both time out.
LOCAL_ONLY_HEADER = "x-dfos-local-only"

# Additive to v0.7.1, which answers an unknown ``after`` with an empty last
# page: our relays also send this header and field so a follower can tell.
UNKNOWN_CURSOR_HEADER = "X-DFOS-Cursor"
UNKNOWN_CURSOR_FIELD = "cursorUnknown"

# Additive to v0.7.1 (which ignores unknown headers): a relay pushing to a
# peer's POST /operations names itself by its relay DID, so the receiver
# can resolve it to a configured peer and never push those ops back to it.
# The receiver trusts it for nothing else: the ops are verified as usual.
RELAY_SENDER_HEADER = "dfos-relay-sender"
# ... and proves the name with a DFOS auth token (iss = its DID, aud = the
# receiver's DID, short-lived; relay.peering.sender_proof). Without a proof
# that verifies, the receiver treats the push as a client's.
RELAY_SENDER_PROOF_HEADER = "dfos-relay-sender-proof"
# Rendezvous fan-out: "1" pushed by the origin to a coordinator, "2"
# forwarded by a coordinator (not forwarded again); absent: a plain client
# or v0.7.1 push.
# "1:<did>": pushed to a stand-in, which forwards the share of coordinator
# <did> (the origin saw <did> failing).
FANOUT_HOP_HEADER = "dfos-relay-hop"
HOP_TO_COORDINATOR = "1"
HOP_FORWARDED = "2"
HOP_STAND_IN_PREFIX = "1:"


def coordinator_hop(hop: str | None) -> tuple[bool, str | None]:
    """(is this a push to a coordinator, whose share it stands in for)."""
    if hop == HOP_TO_COORDINATOR:
        return True, None
    if hop is not None and hop.startswith(HOP_STAND_IN_PREFIX) and len(hop) <= 128:
        stand_in_for = hop[len(HOP_STAND_IN_PREFIX) :]
        if stand_in_for.startswith("did:") and stand_in_for.isprintable():
            return True, stand_in_for
    return False, None
