"""Replay a store's log through the protocol's verifiers, in log order.

Each op is verified from its token alone plus what the ops *before it in
the log* established (keys ever held, chain states, heads, beacons,
countersignatures), with the same functions and relay rules ingestion
applies (``relay.protocol`` verifiers; deleted signers and creators refused;
one countersignature per witness and target; a beacon must be newer than
the last). An op that verifies must also match its stored columns. Since
ingestion commits an op only after everything it depends on, a healthy log
replays without a finding, whatever order ops arrived in.

Not checked here: the other tables (``tables.py``) and positions (``log.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relay.protocol import (
    ContentState,
    DecodedJws,
    IdentityState,
    ProtocolError,
    cid_of,
    decode_jws,
    decode_multikey,
    resolve_from_key_index,
    split_kid,
    token_hash,
    verify_artifact,
    verify_beacon,
    verify_content_extension,
    verify_content_genesis,
    verify_countersign,
    verify_identity_extension,
    verify_identity_genesis,
)
from relay.rules.classify import classify
from relay.rules.heads import is_new_head
from stores.base import OperationRecord

from .findings import Finding


class Invalid(Exception):
    """A relay rule (not a protocol check) refuses the op."""


@dataclass(frozen=True, slots=True)
class Expected:
    """The columns a verified op must have been stored with."""

    kind: str
    chain_id: str
    author_did: str
    parent_cid: str | None
    created_at_ms: int
    state: dict[str, Any] | None


@dataclass(slots=True)
class Head:
    kind: str  # identity / content
    genesis_cid: str
    cid: str
    created_at_ms: int


@dataclass(slots=True)
class Replay:
    now_ms: int
    ops: dict[str, Expected] = field(default_factory=dict)
    keys: dict[str, dict[str, list[bytes]]] = field(default_factory=dict)
    state_keys: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    heads: dict[str, Head] = field(default_factory=dict)
    beacons: dict[str, tuple[int, str]] = field(default_factory=dict)  # did -> (ms, cid)
    countersigns: dict[str, tuple[str, str]] = field(default_factory=dict)  # cid -> pair
    pairs: set[tuple[str, str]] = field(default_factory=set)
    documents: dict[str, set[str]] = field(default_factory=dict)  # creator -> doc CIDs
    # beacons and countersignatures are copied into rows of their own: the
    # hash of the verified token each copy must equal
    tokens: dict[str, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def feed(self, op: OperationRecord) -> None:
        """Verify one op (the next in log order) and record what it establishes."""
        try:
            decoded = decode_jws(op.jws_token)
            derived = cid_of(decoded.payload)
            if derived != op.cid:
                raise Invalid(f"its token's payload has CID {derived}")
            expected = self._verify(decoded, op.cid)
        except (ProtocolError, Invalid) as exc:
            self.findings.append(Finding("op-invalid", op.cid, str(exc), op.seq))
            return
        differs = _differences(expected, op)
        if differs:
            detail = "stored " + "; ".join(differs)
            self.findings.append(Finding("op-row", op.cid, detail, op.seq))
        self.ops[op.cid] = expected
        if expected.kind in ("beacon", "countersign"):
            self.tokens[op.cid] = token_hash(op.jws_token)

    # per kind -----------------------------------------------------------------
    def _verify(self, decoded: DecodedJws, cid: str) -> Expected:
        kind = classify(decoded.typ)
        if kind == "identity-op":
            return self._identity(decoded, cid)
        if kind == "content-op":
            return self._content(decoded, cid)
        if kind in ("beacon", "artifact"):
            return self._standalone(decoded, cid, kind)
        if kind == "countersign":
            return self._countersign(decoded, cid)
        raise Invalid(f"unknown typ {decoded.typ!r}")

    def _identity(self, decoded: DecodedJws, cid: str) -> Expected:
        previous = decoded.payload.get("previousOperationCID")
        if previous is None:
            verified = verify_identity_genesis(decoded, self.now_ms)
        else:
            did = split_kid(decoded.kid or "")[0]
            previous, parent = self._parent(previous, "identity-op")
            if did is None or parent.chain_id != did:
                raise Invalid(f"previous operation {previous} is not in identity {did}")
            assert parent.state is not None
            state = IdentityState.from_record(parent.state)
            verified = verify_identity_extension(
                decoded, did, previous, state, parent.created_at_ms, self.now_ms
            )
        op, did = verified.operation, verified.did
        keys = self.keys.setdefault(did, {})
        for key in verified.state.all_keys():
            self.state_keys.setdefault(did, set()).add((key.id, key.public_key_multibase))
            raw = decode_multikey(key.public_key_multibase)
            if raw not in keys.setdefault(key.id, []):
                keys[key.id].append(raw)
        self._advance(did, "identity", cid, op.created_at_ms)
        return Expected("identity-op", did, did, op.previous_cid, op.created_at_ms,
                        verified.state.to_record())  # fmt: skip

    def _content(self, decoded: DecodedJws, cid: str) -> Expected:
        signer = self._live_signer(decoded.payload.get("did"))
        previous = decoded.payload.get("previousOperationCID")
        if previous is None:
            verified = verify_content_genesis(decoded, self._resolve, self.now_ms)
        else:
            previous, parent = self._parent(previous, "content-op")
            assert parent.state is not None
            state = ContentState.from_record(parent.state)
            if self._deleted(state.creator_did):
                raise Invalid(f"content creator identity {state.creator_did} is deleted")
            verified = verify_content_extension(
                decoded, previous, state, parent.created_at_ms, self._resolve, self.now_ms,
                enforce_authorization=True,
            )  # fmt: skip
        op, content_id = verified.operation, verified.content_id
        document = decoded.payload.get("documentCID")
        if isinstance(document, str):
            self.documents.setdefault(verified.state.creator_did, set()).add(document)
        self._advance(content_id, "content", cid, op.created_at_ms)
        return Expected("content-op", content_id, verified.signer_did or signer,
                        op.previous_cid, op.created_at_ms, verified.state.to_record())  # fmt: skip

    def _standalone(self, decoded: DecodedJws, cid: str, kind: str) -> Expected:
        did = self._live_signer(decoded.payload.get("did"))
        if kind == "artifact":
            created = verify_artifact(decoded, self._resolve, self.now_ms).payload.created_at_ms
            return Expected(kind, did, did, None, created, None)
        created = verify_beacon(decoded, self._resolve, self.now_ms).payload.created_at_ms
        last = self.beacons.get(did)
        if last is not None and created <= last[0]:
            raise Invalid(f"not newer than the beacon {last[1]} before it (never stored)")
        self.beacons[did] = (created, cid)
        return Expected(kind, did, did, None, created, None)

    def _countersign(self, decoded: DecodedJws, cid: str) -> Expected:
        witness = self._live_signer(decoded.payload.get("did"))
        target = decoded.payload.get("targetCID")
        verified = verify_countersign(decoded, self._resolve, self.now_ms)
        found = self.ops.get(target) if isinstance(target, str) else None
        if found is None or not isinstance(target, str):
            raise Invalid(f"target {target} is not in the log before it")
        if found.author_did == witness:
            raise Invalid("the witness is the author of the target")
        if (target, witness) in self.pairs:
            raise Invalid(f"a second countersignature of {target} by {witness}")
        self.pairs.add((target, witness))
        self.countersigns[cid] = (target, witness)
        return Expected("countersign", target, witness, None,
                        verified.payload.created_at_ms, None)  # fmt: skip

    # state ------------------------------------------------------------------------
    def _resolve(self, kid: str) -> Any:
        return resolve_from_key_index(self.keys, kid)

    def _parent(self, previous: object, kind: str) -> tuple[str, Expected]:
        if not isinstance(previous, str):
            raise Invalid("previousOperationCID must be a string")
        parent = self.ops.get(previous)
        if parent is None:
            raise Invalid(f"previous operation {previous} is not in the log before it")
        if parent.kind != kind or parent.state is None:
            raise Invalid(f"previous operation {previous} is not a {kind}")
        return previous, parent

    def _live_signer(self, did: object) -> str:
        if not isinstance(did, str):
            raise Invalid("the payload's did must be a string")
        if did not in self.heads:
            raise Invalid(f"signer identity {did} is not in the log before it")
        if self._deleted(did):
            raise Invalid(f"signer identity {did} is deleted")
        return did

    def _deleted(self, did: str) -> bool:
        head = self.heads.get(did)
        state = self.ops[head.cid].state if head is not None else None
        return bool(state and state.get("deleted"))

    def _advance(self, chain_id: str, kind: str, cid: str, created_at_ms: int) -> None:
        head = self.heads.get(chain_id)
        if head is None:
            self.heads[chain_id] = Head(kind, cid, cid, created_at_ms)
        elif is_new_head(created_at_ms, cid, head.created_at_ms, head.cid):
            head.cid, head.created_at_ms = cid, created_at_ms


def _differences(expected: Expected, op: OperationRecord) -> list[str]:
    pairs = (
        ("kind", op.kind, expected.kind),
        ("chainId", op.chain_id, expected.chain_id),
        ("signer", op.author_did, expected.author_did),
        ("parent", op.parent_cid, expected.parent_cid),
        ("createdAt", op.created_at_ms, expected.created_at_ms),
    )
    out = [f"{name} {stored!r}, the token says {real!r}" for name, stored, real in pairs
           if stored != real]  # fmt: skip
    if op.state != expected.state:
        out.append("state snapshot differs from the verified state")
    return out
