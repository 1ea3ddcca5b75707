"""Subscription filters, from query parameters (SSE) or a JSON object
(WebSocket). Both shapes carry the same fields (the draft's names)::

    mode      "tail" (default) or "bootstrap"
    since     a seq or a token <epoch>.<seq> (tail; Last-Event-ID wins over it)
    live      keep following after EOSE (default: false)
    until_seq stop after this seq (inclusive)
    limit     at most this many events
    kinds     identity-op, content-op, beacon, artifact, countersign
    authors   signer DIDs
    chains    identity DIDs or contentIds (chainId of an op)
    scope     identity DIDs and contentIds, served with their dependency
              closure (relay.scope); not combined with kinds/authors/chains

Lists are comma-separated in a query. Seqs (since, a token's position,
Last-Event-ID, until_seq, limit) are canonical decimals, as the relay writes
them: "01" is malformed. Anything malformed is a 400.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from relay.feed.errors import FeedRequestError
from relay.feed.tokens import Since, parse_decimal, parse_since
from relay.protocol.ids import is_content_id, is_dfos_did
from relay.scope import Scope, ScopeError, parse_scope
from stores.base import FeedEntry

KINDS = ("identity-op", "content-op", "beacon", "artifact", "countersign")
MODES = ("tail", "bootstrap")
MAX_FILTER_VALUES = 1000
MAX_LIMIT = 1_000_000
Mode = Literal["tail", "bootstrap"]


@dataclass(frozen=True, slots=True)
class FeedFilter:
    mode: Mode = "tail"
    since: Since | None = None
    live: bool = False
    until_seq: int | None = None
    limit: int | None = None
    kinds: frozenset[str] | None = None
    authors: frozenset[str] | None = None
    chains: frozenset[str] | None = None
    scope: Scope | None = None

    @property
    def is_open(self) -> bool:
        """No kind, author, chain or scope filter: every entry matches."""
        return (
            self.kinds is None and self.authors is None and self.chains is None
        ) and self.scope is None

    def matches(self, kind: str, author: str, chain_id: str) -> bool:
        return (
            (self.kinds is None or kind in self.kinds)
            and (self.authors is None or author in self.authors)
            and (self.chains is None or chain_id in self.chains)
        )

    def matches_entry(self, entry: FeedEntry) -> bool:
        return self.matches(entry.kind, entry.author_did, entry.chain_id)


def _values(name: str, raw: Any) -> list[str]:
    if isinstance(raw, str):
        values = [v.strip() for v in raw.split(",") if v.strip()]
    elif isinstance(raw, list) and all(isinstance(v, str) for v in raw):
        values = [v.strip() for v in raw]
    else:
        raise FeedRequestError(f"{name} must be a list of strings")
    if not values:
        raise FeedRequestError(f"{name} must not be empty")
    if len(values) > MAX_FILTER_VALUES:
        raise FeedRequestError(f"{name} holds more than {MAX_FILTER_VALUES} values")
    return values


def _kinds(raw: Any) -> frozenset[str]:
    values = _values("kinds", raw)
    unknown = sorted(set(values) - set(KINDS))
    if unknown:
        raise FeedRequestError(f"unknown kinds {unknown}; known: {', '.join(KINDS)}")
    return frozenset(values)


def _dids(name: str, raw: Any) -> frozenset[str]:
    values = _values(name, raw)
    bad = [v for v in values if not is_dfos_did(v)]
    if bad:
        raise FeedRequestError(f"{name}: not a did:dfos identifier: {bad[0][:80]!r}")
    return frozenset(values)


def _chains(raw: Any) -> frozenset[str]:
    values = _values("chains", raw)
    bad = [v for v in values if not (is_dfos_did(v) or is_content_id(v))]
    if bad:
        raise FeedRequestError(f"chains: not a DID or contentId: {bad[0][:80]!r}")
    return frozenset(values)


def _int(name: str, raw: Any, low: int, high: int) -> int:
    if isinstance(raw, bool):
        raise FeedRequestError(f"{name} must be an integer")
    if isinstance(raw, str) and (number := parse_decimal(raw)) is not None:
        raw = number  # a canonical decimal, as since and tokens are read
    if not isinstance(raw, int) or not low <= raw <= high:
        raise FeedRequestError(f"{name} must be an integer {low}..{high}")
    return raw


def _bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("1", "true", "yes", "0", "false", "no"):
        return raw.lower() in ("1", "true", "yes")
    raise FeedRequestError(f"{name} must be true or false")


def build_filter(fields: Mapping[str, Any], last_event_id: str | None = None) -> FeedFilter:
    known = {"mode", "since", "live", "until_seq", "limit", "kinds", "authors", "chains", "scope"}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise FeedRequestError(f"unknown filter fields {unknown}")
    mode = fields.get("mode", "tail")
    if mode not in MODES:
        raise FeedRequestError(f"mode must be one of {', '.join(MODES)}")
    if last_event_id and mode == "bootstrap":
        # an EventSource reconnecting to a bootstrap URL: it got past the
        # snapshot's EOSE (the first id sent), so it goes on as a tail
        mode = "tail"
    since_raw = last_event_id if last_event_id else fields.get("since")
    since: Since | None = None
    if since_raw is not None:
        if mode == "bootstrap":
            raise FeedRequestError("since applies to tail mode; bootstrap starts at a snapshot")
        if isinstance(since_raw, int) and not isinstance(since_raw, bool):
            since_raw = str(since_raw)
        if not isinstance(since_raw, str):
            raise FeedRequestError("since must be a seq or a token string")
        since = parse_since(since_raw)
    return FeedFilter(
        mode=mode,
        since=since,
        live=_bool("live", fields["live"]) if "live" in fields else False,
        until_seq=_int("until_seq", fields["until_seq"], 0, 2**62)
        if "until_seq" in fields
        else None,
        limit=_int("limit", fields["limit"], 1, MAX_LIMIT) if "limit" in fields else None,
        kinds=_kinds(fields["kinds"]) if "kinds" in fields else None,
        authors=_dids("authors", fields["authors"]) if "authors" in fields else None,
        chains=_chains(fields["chains"]) if "chains" in fields else None,
        scope=_scope(fields) if "scope" in fields else None,
    )


def _scope(fields: Mapping[str, Any]) -> Scope:
    if {"kinds", "authors", "chains"} & set(fields):
        raise FeedRequestError("scope cannot be combined with kinds, authors or chains")
    raw = fields["scope"]
    if not isinstance(raw, str | list):
        raise FeedRequestError("scope must be a list of DIDs and contentIds")
    try:
        return parse_scope(raw)
    except ScopeError as exc:
        raise FeedRequestError(f"scope: {exc}") from None


def filter_from_query(params: Iterable[tuple[str, str]], last_event_id: str | None) -> FeedFilter:
    fields: dict[str, str] = {}
    for key, value in params:
        if key in fields:
            raise FeedRequestError(f"{key} is given twice; lists are comma-separated")
        fields[key] = value
    return build_filter(fields, last_event_id)


def filter_from_json(data: Any) -> FeedFilter:
    if not isinstance(data, dict):
        raise FeedRequestError("the filter must be a JSON object")
    return build_filter(data)
