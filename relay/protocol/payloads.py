"""Operation payload schemas (PROTOCOL.md "Operation Schemas", "Operation Field Limits").

Role: turn a decoded JWS payload (a JSON object) into a frozen dataclass, or
raise ``MalformedError``. Covers identity and content operations, beacons,
artifacts and countersignatures.

Invariants enforced here (all structural, no chain state):
- ``version`` is the number 1 and ``type`` is one of the literals of the kind;
- required fields are present with the right JSON type; nullable fields
  (``baseDocumentCID``, ``note``, update ``documentCID``) must be present too;
- field limits: did <= 256, key id <= 64, publicKeyMultibase <= 128,
  <= 16 keys per role, previousOperationCID / documentCID / baseDocumentCID /
  targetCID <= 256, note <= 256 characters;
- every key's multikey decodes to an Ed25519 key (so states never hold
  unusable keys), and create/update identity ops have >= 1 controller key;
- ``create`` operations carry no ``previousOperationCID``; update/delete must;
- ``createdAt`` parses (see ``timestamps``).
No other fields: the reference schemas are strict objects (``z.strictObject``),
so a field beyond the kind's own is rejected, in key entries too; a present
``authorization`` is a string (update and delete only).
Not checked here: that CID-valued fields are well-formed CIDs (they are only
compared or looked up), signatures, and anything needing chain state.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._fields import (
    MAX_CID_CHARS,
    MAX_DID_CHARS,
    MAX_NOTE_CHARS,
    check_fields,
    check_type,
    check_version,
    created_at,
    nullable_str,
    required_str,
)
from .envelope import TYP_ARTIFACT, TYP_BEACON, TYP_CONTENT, TYP_COUNTERSIGN, TYP_IDENTITY
from .errors import MalformedError
from .jws import MAX_TOKEN_CHARS, DecodedJws
from .multikey import decode_multikey, encode_multikey
from .records import quick_init

__all__ = [
    "ARTIFACT_MAX_CBOR_BYTES",
    "MAX_KEYS_PER_ROLE",
    "ArtifactPayload",
    "BeaconPayload",
    "ContentOperation",
    "CountersignPayload",
    "IdentityOperation",
    "MultikeyPublicKey",
    "OperationType",
    "check_typ_payload",
    "parse_artifact",
    "parse_beacon",
    "parse_content_operation",
    "parse_countersign",
    "parse_identity_operation",
    "parse_multikey_public_key",
]

OperationType = Literal["create", "update", "delete"]
ARTIFACT_MAX_CBOR_BYTES = 16384
MAX_KEYS_PER_ROLE = 16
MAX_KEY_ID_CHARS = 64
MAX_MULTIBASE_CHARS = 128
_OP_TYPES: tuple[OperationType, ...] = ("create", "update", "delete")
_MERKLE_ROOT_RE = re.compile(r"[0-9a-f]{64}")
MAX_SCHEMA_CHARS = 256
_KEY_FIELDS = frozenset({"id", "type", "publicKeyMultibase"})
_COMMON = ("version", "type", "createdAt")
_IDENTITY_FIELDS: dict[str, frozenset[str]] = {
    "create": frozenset({*_COMMON, "authKeys", "assertKeys", "controllerKeys"}),
    "update": frozenset(
        {*_COMMON, "previousOperationCID", "authKeys", "assertKeys", "controllerKeys"}
    ),
    "delete": frozenset({*_COMMON, "previousOperationCID"}),
}
_CONTENT_FIELDS: dict[str, frozenset[str]] = {
    "create": frozenset({*_COMMON, "did", "documentCID", "baseDocumentCID", "note"}),
    "update": frozenset(
        {
            *_COMMON,
            "did",
            "previousOperationCID",
            "documentCID",
            "baseDocumentCID",
            "note",
            "authorization",
        }
    ),
    "delete": frozenset({*_COMMON, "did", "previousOperationCID", "note", "authorization"}),
}
_BEACON_FIELDS = frozenset({*_COMMON, "did", "merkleRoot"})
_ARTIFACT_FIELDS = frozenset({*_COMMON, "did", "content"})
_COUNTERSIGN_FIELDS = frozenset({*_COMMON, "did", "targetCID"})


@quick_init
@dataclass(frozen=True, slots=True)
class MultikeyPublicKey:
    """A public key entry of an identity key set."""

    id: str
    type: str
    public_key_multibase: str

    @property
    def public_key(self) -> bytes:
        """The raw 32-byte Ed25519 public key (decoding is memoised)."""
        return decode_multikey(self.public_key_multibase)

    def to_json(self) -> dict[str, object]:
        """The camelCase wire form used in payloads and state responses."""
        return {"id": self.id, "type": self.type, "publicKeyMultibase": self.public_key_multibase}

    @classmethod
    def from_public_key(cls, public_key: bytes, key_id: str) -> MultikeyPublicKey:
        return cls(id=key_id, type="Multikey", public_key_multibase=encode_multikey(public_key))


def parse_multikey_public_key(value: object, where: str = "key") -> MultikeyPublicKey:
    """Parse one ``{id, type: "Multikey", publicKeyMultibase}`` entry."""
    if not isinstance(value, dict):
        raise MalformedError(f"{where} must be an object")
    check_fields(value, _KEY_FIELDS, where)
    key_id = required_str(value, "id", MAX_KEY_ID_CHARS, where=where, allow_empty=True)
    if value.get("type") != "Multikey":
        raise MalformedError(f'{where}.type must be "Multikey"')
    multibase = required_str(value, "publicKeyMultibase", MAX_MULTIBASE_CHARS, where=where)
    decode_multikey(multibase)
    return MultikeyPublicKey(key_id, "Multikey", multibase)


def _key_list(payload: dict[str, object], name: str) -> tuple[MultikeyPublicKey, ...]:
    value = payload.get(name)
    if not isinstance(value, list):
        raise MalformedError(f"{name} must be an array")
    if len(value) > MAX_KEYS_PER_ROLE:
        raise MalformedError(f"{name} has more than {MAX_KEYS_PER_ROLE} keys")
    return tuple(parse_multikey_public_key(item, name) for item in value)


def _previous_cid(payload: dict[str, object], op_type: str) -> str | None:
    if op_type == "create":
        if payload.get("previousOperationCID") is not None:
            raise MalformedError("create must not have previousOperationCID")
        return None
    return required_str(payload, "previousOperationCID", MAX_CID_CHARS)


@quick_init
@dataclass(frozen=True, slots=True)
class IdentityOperation:
    """A parsed identity chain operation (key sets are empty for delete)."""

    type: OperationType
    previous_cid: str | None
    auth_keys: tuple[MultikeyPublicKey, ...]
    assert_keys: tuple[MultikeyPublicKey, ...]
    controller_keys: tuple[MultikeyPublicKey, ...]
    created_at: str
    created_at_ms: int


def parse_identity_operation(payload: dict[str, object]) -> IdentityOperation:
    """Parse an identity operation payload.

    A create/update without controller keys is a ``MalformedError`` (schema rule).
    """
    check_version(payload)
    op_type = check_type(payload, _OP_TYPES)
    check_fields(payload, _IDENTITY_FIELDS[op_type])
    previous = _previous_cid(payload, op_type)
    keys: tuple[tuple[MultikeyPublicKey, ...], ...] = ((), (), ())
    if op_type != "delete":
        keys = tuple(_key_list(payload, n) for n in ("authKeys", "assertKeys", "controllerKeys"))
        if not keys[2]:
            raise MalformedError(f"{op_type} must have at least one controller key")
    text, ms = created_at(payload)
    return IdentityOperation(op_type, previous, keys[0], keys[1], keys[2], text, ms)


@quick_init
@dataclass(frozen=True, slots=True)
class ContentOperation:
    """A parsed content chain operation."""

    type: OperationType
    did: str
    previous_cid: str | None
    document_cid: str | None
    base_document_cid: str | None
    created_at: str
    created_at_ms: int
    note: str | None
    authorization: str | None


def parse_content_operation(payload: dict[str, object]) -> ContentOperation:
    """Parse a content operation payload (``authorization`` is optional, null = absent)."""
    check_version(payload)
    op_type = check_type(payload, _OP_TYPES)
    check_fields(payload, _CONTENT_FIELDS[op_type])
    did = required_str(payload, "did", MAX_DID_CHARS)
    previous = _previous_cid(payload, op_type)
    document = base = None
    if op_type == "create":
        document = required_str(payload, "documentCID", MAX_CID_CHARS)
    elif op_type == "update":
        document = nullable_str(payload, "documentCID", MAX_CID_CHARS)
    if op_type != "delete":
        base = nullable_str(payload, "baseDocumentCID", MAX_CID_CHARS)
    note = nullable_str(payload, "note", MAX_NOTE_CHARS)
    authorization: str | None = None
    if "authorization" in payload:  # absent, or a string (null is not allowed)
        authorization = required_str(payload, "authorization", MAX_TOKEN_CHARS, allow_empty=True)
    text, ms = created_at(payload)
    return ContentOperation(op_type, did, previous, document, base, text, ms, note, authorization)


@dataclass(frozen=True, slots=True)
class BeaconPayload:
    """A beacon: a signed merkle root over an identity's content ids."""

    did: str
    merkle_root: str
    created_at: str
    created_at_ms: int


def parse_beacon(payload: dict[str, object]) -> BeaconPayload:
    check_version(payload)
    check_type(payload, ("beacon",))
    check_fields(payload, _BEACON_FIELDS)
    did = required_str(payload, "did", MAX_DID_CHARS)
    root = payload.get("merkleRoot")
    if not isinstance(root, str) or _MERKLE_ROOT_RE.fullmatch(root) is None:
        raise MalformedError("merkleRoot must be 64 lowercase hex characters")
    text, ms = created_at(payload)
    return BeaconPayload(did, root, text, ms)


@dataclass(frozen=True, slots=True)
class ArtifactPayload:
    """A standalone signed inline document; ``content`` carries a ``$schema``."""

    did: str
    content: dict[str, object]
    created_at: str
    created_at_ms: int

    @property
    def schema(self) -> str:
        return str(self.content["$schema"])


def parse_artifact(payload: dict[str, object]) -> ArtifactPayload:
    check_version(payload)
    check_type(payload, ("artifact",))
    check_fields(payload, _ARTIFACT_FIELDS)
    did = required_str(payload, "did", MAX_DID_CHARS)
    content = payload.get("content")
    if not isinstance(content, dict):
        raise MalformedError("content must be an object")
    required_str(content, "$schema", MAX_SCHEMA_CHARS, where="content", allow_empty=True)
    text, ms = created_at(payload)
    return ArtifactPayload(did, content, text, ms)


@quick_init
@dataclass(frozen=True, slots=True)
class CountersignPayload:
    """A witness attestation of the operation addressed by ``target_cid``."""

    did: str
    target_cid: str
    created_at: str
    created_at_ms: int


def parse_countersign(payload: dict[str, object]) -> CountersignPayload:
    check_version(payload)
    check_type(payload, ("countersign",))
    check_fields(payload, _COUNTERSIGN_FIELDS)
    did = required_str(payload, "did", MAX_DID_CHARS)
    target = required_str(payload, "targetCID", MAX_CID_CHARS)
    text, ms = created_at(payload)
    return CountersignPayload(did, target, text, ms)


# The schema each typ's verifier parses first (countersigns: the same).
_PARSERS: dict[str, Callable[[dict[str, object]], object]] = {
    TYP_IDENTITY: parse_identity_operation,
    TYP_CONTENT: parse_content_operation,
    TYP_BEACON: parse_beacon,
    TYP_ARTIFACT: parse_artifact,
    TYP_COUNTERSIGN: parse_countersign,
}


def check_typ_payload(decoded: DecodedJws) -> None:
    """The payload schema of ``decoded``'s typ, before it can be verified (its
    parent or signer is missing): raises ``MalformedError`` exactly when
    verification would at its parse, whenever it ran (every verifier parses
    right after its typ check, and a schema reads no chain state). An
    unknown typ is not checked."""
    parse = _PARSERS.get(decoded.typ or "")
    if parse is not None:
        parse(decoded.payload)
