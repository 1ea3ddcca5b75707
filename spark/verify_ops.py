"""Pure per-chain and per-op re-verification, run inside Spark Python workers.

Role: the part of ``--verify`` Spark has no column function for (Ed25519,
dag-cbor CID, chain state transitions). Everything cryptographic is
``relay.protocol``; the relay-side gates mirror ``relay/ingest``:

- identity ops replay per DID from the genesis through the DAG, each
  extension verified O(1) against its parent's state (forks included);
- keys resolve like the relay's historical resolver (``StateView``): any key
  the signer's identity held in any valid state, in any role;
- content ops replay per chain with authorization enforced (creator
  sovereignty, ``DFOSContentWrite`` credentials);
- beacons, artifacts and countersignatures verify standalone.

Deletion is judged by time, since a replay has no ingestion order: an op by
(or on a chain created by) an identity whose head is a delete is invalid when
its createdAt is later than that delete. Each function returns
``(token_hash, cid, kind, chain_id, error)`` rows, one per log entry (a
token may be filed under several CIDs or claims, each judged on its own),
``error`` None for a valid op.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import groupby
from typing import Any

from relay.protocol import (
    ContentState,
    DecodedJws,
    IdentityState,
    ProtocolError,
    decode_jws,
    decode_multikey,
    resolve_from_key_index,
    verify_artifact,
    verify_beacon,
    verify_content_extension,
    verify_content_genesis,
    verify_countersign,
    verify_identity_extension,
    verify_identity_genesis,
)
from relay.rules.classify import classify

__all__ = [
    "HistoryResolver",
    "chain_partition",
    "identity_partition",
    "now_ms",
    "replay_content",
    "replay_identity",
    "verify_standalone",
]

Result = tuple[str, str, str, str, str | None]
EntryKey = tuple[str, str]  # (token hash, cid): one log entry of a chain
KeyHistory = tuple[list[tuple[str, str]], int | None]  # (key id, multibase) pairs, deleted at
_DELETED = "deleted identity"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _error(exc: ProtocolError) -> str:
    return f"{type(exc).__name__}: {exc}"


def _key(entry: Any) -> EntryKey:
    return entry["tokenHash"], entry["cid"]


def _claim(entry: Any) -> tuple[str, str, str, str]:
    return entry["tokenHash"], entry["cid"], entry["kind"], entry["chainId"]


def _decode(entry: Any, kind: str) -> DecodedJws | str:
    """Decode and check what the log entry itself claims (cid header, kind)."""
    try:
        decoded = decode_jws(entry["jwsToken"])
    except ProtocolError as exc:
        return _error(exc)
    if decoded.header_cid != entry["cid"]:
        return f"log entry cid {entry['cid']} differs from header cid {decoded.header_cid}"
    if classify(decoded.typ) != kind:
        return f"typ {decoded.typ!r} is not a {kind}"
    return decoded


# identity --------------------------------------------------------------------
def replay_identity(did: str, entries: Sequence[Any], now: int) -> tuple[list[Result], KeyHistory]:
    """Verify every identity op of ``did``; return results and its key history."""
    results: dict[EntryKey, str | None] = {}
    children: dict[str | None, list[tuple[Any, DecodedJws]]] = defaultdict(list)
    for entry in entries:
        decoded = _decode(entry, "identity-op")
        if isinstance(decoded, str):
            results[_key(entry)] = decoded
            continue
        prev = decoded.payload.get("previousOperationCID")
        children[prev if isinstance(prev, str) else None].append((entry, decoded))
    states: dict[str, tuple[IdentityState, int]] = {}
    frontier: list[str | None] = [None]
    while frontier:
        parent = frontier.pop()
        for entry, decoded in children.pop(parent, []):
            try:
                if parent is None:
                    verified = verify_identity_genesis(decoded, now)
                    if verified.did != did:
                        raise ProtocolError(f"genesis derives {verified.did}, not {did}")
                else:
                    state, parent_ms = states[parent]
                    verified = verify_identity_extension(
                        decoded, did, parent, state, parent_ms, now
                    )
            except ProtocolError as exc:
                results[_key(entry)] = _error(exc)
                continue
            results[_key(entry)] = None
            if verified.cid not in states:
                states[verified.cid] = (verified.state, verified.operation.created_at_ms)
                frontier.append(verified.cid)
    for orphans in children.values():
        for entry, decoded in orphans:
            prev = decoded.payload.get("previousOperationCID")
            results[_key(entry)] = f"previous operation {prev} is not a valid op of {did}"
    rows = [(h, cid, "identity-op", did, err) for (h, cid), err in results.items()]
    return rows, _history(states)


def _history(states: dict[str, tuple[IdentityState, int]]) -> KeyHistory:
    keys = sorted(
        {(k.id, k.public_key_multibase) for s, _ in states.values() for k in s.all_keys()}
    )
    if not states:
        return keys, None
    head_cid = max(states, key=lambda c: (states[c][1], c))
    head, head_ms = states[head_cid]
    return keys, head_ms if head.is_deleted else None


# key resolution --------------------------------------------------------------
class HistoryResolver:
    """``KeyResolver`` over replayed key histories: ``did -> (keys, deletedAt)``."""

    def __init__(self, histories: dict[str, KeyHistory]) -> None:
        self._keys: dict[str, dict[str, list[bytes]]] = {}
        self.deleted_at: dict[str, int | None] = {}
        for did, (pairs, deleted_at) in histories.items():
            by_id: dict[str, list[bytes]] = defaultdict(list)
            for key_id, multibase in pairs:
                try:
                    by_id[key_id].append(decode_multikey(multibase))
                except ProtocolError:
                    continue
            self._keys[did] = by_id
            self.deleted_at[did] = deleted_at

    def __call__(self, kid: str) -> Sequence[bytes]:
        return resolve_from_key_index(self._keys, kid)

    def gate(self, did: str | None, created_ms: int, role: str) -> str | None:
        """Refuse acts of an identity later than its (head) delete."""
        if did is None:
            return None
        if did not in self.deleted_at:
            return f"{role} {did} has no valid identity chain"
        deleted_at = self.deleted_at[did]
        if deleted_at is not None and created_ms > deleted_at:
            return f"{_DELETED}: {role} {did} was deleted before this op"
        return None


# content ---------------------------------------------------------------------
def replay_content(
    content_id: str, entries: Sequence[Any], resolver: HistoryResolver, now: int
) -> list[Result]:
    """Verify every op of a content chain from its genesis through the DAG."""
    results: dict[EntryKey, str | None] = {}
    children: dict[str | None, list[tuple[Any, DecodedJws]]] = defaultdict(list)
    for entry in entries:
        decoded = _decode(entry, "content-op")
        if isinstance(decoded, str):
            results[_key(entry)] = decoded
            continue
        prev = decoded.payload.get("previousOperationCID")
        children[prev if isinstance(prev, str) else None].append((entry, decoded))
    states: dict[str, tuple[ContentState, int]] = {}
    frontier: list[str | None] = [None]
    while frontier:
        parent = frontier.pop()
        for entry, decoded in children.pop(parent, []):
            outcome = _content_step(content_id, decoded, parent, states, resolver, now)
            if isinstance(outcome, str):
                results[_key(entry)] = outcome
                continue
            results[_key(entry)] = None
            cid, state, created_ms = outcome
            if cid not in states:
                states[cid] = (state, created_ms)
                frontier.append(cid)
    for orphans in children.values():
        for entry, decoded in orphans:
            prev = decoded.payload.get("previousOperationCID")
            results[_key(entry)] = f"previous operation {prev} is not a valid op of {content_id}"
    return [(h, cid, "content-op", content_id, err) for (h, cid), err in results.items()]


def _content_step(
    content_id: str,
    decoded: DecodedJws,
    parent: str | None,
    states: dict[str, tuple[ContentState, int]],
    resolver: HistoryResolver,
    now: int,
) -> tuple[str, ContentState, int] | str:
    try:
        if parent is None:
            verified = verify_content_genesis(decoded, resolver, now)
            if verified.content_id != content_id:
                return f"genesis derives {verified.content_id}, not {content_id}"
        else:
            state, parent_ms = states[parent]
            verified = verify_content_extension(
                decoded, parent, state, parent_ms, resolver, now, enforce_authorization=True
            )
    except ProtocolError as exc:
        return _error(exc)
    created = verified.operation.created_at_ms
    refused = resolver.gate(verified.signer_did, created, "signer") or resolver.gate(
        verified.state.creator_did, created, "content creator"
    )
    if refused is not None:
        return refused
    return verified.cid, verified.state, created


# standalone ------------------------------------------------------------------
_STANDALONE: dict[str, Callable[..., Any]] = {
    "beacon": verify_beacon,
    "artifact": verify_artifact,
    "countersign": verify_countersign,
}


def verify_standalone(entry: Any, resolver: HistoryResolver, now: int) -> Result:
    """Verify one beacon, artifact or countersignature (stateless part only)."""
    kind = entry["kind"]
    decoded = _decode(entry, kind)
    if isinstance(decoded, str):
        return (*_claim(entry), decoded)
    try:
        verified = _STANDALONE[kind](decoded, resolver, now)
    except ProtocolError as exc:
        return (*_claim(entry), _error(exc))
    payload = verified.payload
    error = resolver.gate(payload.did, payload.created_at_ms, f"{kind} signer")
    expected_chain = payload.target_cid if kind == "countersign" else payload.did
    if error is None and entry["chainId"] != expected_chain:
        error = f"log chainId {entry['chainId']} is not {expected_chain}"
    return (*_claim(entry), error)


def identity_partition(rows: Iterable[Any], now: int) -> Iterator[tuple[Any, ...]]:
    """mapPartitions body over identity ops sorted by ``chainId`` (the DID):
    one ``(did, keys, deletedAt, errors)`` row per DID, errors only."""
    for did, group in groupby(rows, key=lambda row: row["chainId"]):
        results, (keys, deleted_at) = replay_identity(did, list(group), now)
        yield did, keys, deleted_at, [r for r in results if r[4] is not None]


def chain_partition(rows: Iterable[Any], now: int) -> Iterator[Result]:
    """mapPartitions body over groups sorted by ``(gkey, rowType)``: a group
    is a content chain or a signer DID, its key histories (rowType 0) first,
    then its ops (rowType 1). Yields the invalid ops only."""
    for _, group in groupby(rows, key=lambda row: row["gkey"]):
        histories: dict[str, KeyHistory] = {}
        content: list[Any] = []
        standalone: list[Any] = []
        for row in group:
            if row["rowType"] == 0:
                histories[row["did"]] = (row["keys"] or [], row["deletedAt"])
            elif row["kind"] == "content-op":
                content.append(row)
            else:
                standalone.append(row)
        resolver = HistoryResolver(histories)
        results = replay_content(content[0]["chainId"], content, resolver, now) if content else []
        results.extend(verify_standalone(row, resolver, now) for row in standalone)
        yield from (r for r in results if r[4] is not None)
