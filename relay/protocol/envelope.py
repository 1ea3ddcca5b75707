"""Shared rules for signed operation envelopes (JWS + ``cid`` header).

Role: the ``typ`` constants, the future-timestamp guards, the key-resolver
seam, the ``cid`` header check and the signing helper used by every
operation kind (identity, content, beacon, artifact, countersign).

Invariants:
- the header ``cid`` must equal the CID derived from the parsed payload
  (canonical dag-cbor, so ``1.0`` and ``1`` hash alike) - PROTOCOL.md "cid Header";
- a ``KeyResolver`` returns candidate raw keys for a ``kid`` DID URL or raises
  ``KeyNotFoundError``; a signature passes if any candidate verifies;
- verifiers resolve keys last, after every structural and chain check, so a
  ``KeyNotFoundError`` (a retryable missing dependency) is only ever raised
  for an operation that would otherwise be acceptable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ._fields import created_at
from .cid import cid_from_cbor
from .dagcbor import encode_canonical
from .errors import (
    ChainError,
    CidMismatchError,
    FutureTimestampError,
    KeyNotFoundError,
    MalformedError,
    SignatureError,
)
from .ids import split_kid
from .jws import DecodedJws, Signer, sign_jws
from .keys import verify_signature

__all__ = [
    "BEACON_FUTURE_GUARD_MS",
    "FUTURE_GUARD_MS",
    "TYP_ARTIFACT",
    "TYP_BEACON",
    "TYP_CONTENT",
    "TYP_COUNTERSIGN",
    "TYP_IDENTITY",
    "TYP_JWT",
    "TYP_VC",
    "KeyResolver",
    "SignedOperation",
    "check_cid",
    "check_not_future",
    "check_typ_not_future",
    "expect_typ",
    "kid_did_url",
    "resolve_from_key_index",
    "sign_operation",
    "signer_did",
    "verify_with_resolver",
]

TYP_IDENTITY = "did:dfos:identity-op"
TYP_CONTENT = "did:dfos:content-op"
TYP_BEACON = "did:dfos:beacon"
TYP_ARTIFACT = "did:dfos:artifact"
TYP_COUNTERSIGN = "did:dfos:countersign"
TYP_JWT = "JWT"
TYP_VC = "vc+jwt"

FUTURE_GUARD_MS = 24 * 3600 * 1000
BEACON_FUTURE_GUARD_MS = 5 * 60 * 1000

KeyResolver = Callable[[str], Sequence[bytes]]
"""Given a ``kid`` DID URL, return candidate raw Ed25519 public keys.

Raises ``KeyNotFoundError`` when the identity or key is unknown."""

KeyIndex = Mapping[str, Mapping[str, Sequence[bytes]]]
"""DID -> key id -> every raw public key the identity held under that id."""


def resolve_from_key_index(keys: KeyIndex, kid: str) -> Sequence[bytes]:
    """A ``KeyResolver`` over an identity's whole key history.

    Using the history (not just the head) keeps verification
    order-independent: an op signed before a rotation verifies the same
    whether it is checked before or after the rotation.
    """
    did, key_id = split_kid(kid)
    if did is None:
        raise KeyNotFoundError(f"kid {kid!r} is not a DID URL", did=None)
    found = keys.get(did, {}).get(key_id)
    if not found:
        raise KeyNotFoundError(f"key {kid} is not known", did=did)
    return found


@dataclass(frozen=True, slots=True)
class SignedOperation:
    """A freshly signed operation token and its CID."""

    token: str
    cid: str


def expect_typ(decoded: DecodedJws, typ: str) -> None:
    if decoded.typ != typ:
        raise MalformedError(f"JWS typ must be {typ}")


def check_cid(decoded: DecodedJws) -> tuple[str, bytes]:
    """Derive the payload CID and require the header ``cid`` to equal it.

    Returns ``(cid, canonical_cbor_bytes)``. Raises ``CidMismatchError``.
    """
    if decoded.payload_cid is not None:
        cid, cbor = decoded.payload_cid
    else:
        cbor = encode_canonical(decoded.payload)
        cid = cid_from_cbor(cbor)
    header_cid = decoded.header.get("cid")
    if header_cid is None:
        raise CidMismatchError("JWS header has no cid")
    if header_cid != cid:
        raise CidMismatchError(f"header cid does not match payload CID {cid}")
    return cid, cbor


def check_not_future(created_at_ms: int, now_ms: int, guard_ms: int = FUTURE_GUARD_MS) -> None:
    """Reject a ``createdAt`` more than ``guard_ms`` ahead of the verifier's clock."""
    if created_at_ms > now_ms + guard_ms:
        hours, minutes = divmod(guard_ms // 60_000, 60)
        window = f"{hours}h" if not minutes else f"{guard_ms // 60_000}min"
        raise FutureTimestampError(f"createdAt is more than {window} in the future")


# The future guard of each typ that has one (countersignatures have none).
FUTURE_GUARDS_MS: dict[str, int] = {
    TYP_IDENTITY: FUTURE_GUARD_MS,
    TYP_CONTENT: FUTURE_GUARD_MS,
    TYP_ARTIFACT: FUTURE_GUARD_MS,
    TYP_BEACON: BEACON_FUTURE_GUARD_MS,
}


def check_typ_not_future(decoded: DecodedJws, now_ms: int) -> None:
    """The future guard of ``decoded``'s typ on its ``createdAt``, before it
    can be verified (its parent or signer is missing): raises
    ``FutureTimestampError`` exactly when verification would, whenever it
    ran. Not checked: anything else, and a ``createdAt`` that does not
    parse (verification says so once it runs)."""
    guard_ms = FUTURE_GUARDS_MS.get(decoded.typ or "")
    if guard_ms is None:
        return
    try:
        _, created_ms = created_at(decoded.payload)
    except MalformedError:
        return
    check_not_future(created_ms, now_ms, guard_ms)


def kid_did_url(decoded: DecodedJws) -> tuple[str, str]:
    """``(did, key_id)`` of a header ``kid`` that must be a DID URL."""
    kid = decoded.kid
    if kid is None:
        raise MalformedError("JWS header has no kid")
    did, key_id = split_kid(kid)
    if did is None:
        raise MalformedError("kid must be a DID URL (did:dfos:...#key)")
    return did, key_id


def signer_did(decoded: DecodedJws, payload_did: str) -> str:
    """The kid DID, which must equal the payload ``did`` (signer-payload consistency)."""
    did, _ = kid_did_url(decoded)
    if did != payload_did:
        raise ChainError("kid DID does not match payload did")
    return did


def verify_with_resolver(decoded: DecodedJws, resolve_key: KeyResolver, did: str) -> bytes:
    """Resolve the header ``kid`` and verify the signature against any candidate
    key; returns the key it verifies under."""
    kid = decoded.kid
    if kid is None:
        raise MalformedError("JWS header has no kid")
    try:
        candidates = resolve_key(kid)
    except KeyNotFoundError as exc:
        if exc.did is None:
            exc.did = did
        raise
    if not candidates:
        raise KeyNotFoundError(f"no public key found for {kid}", did)
    if decoded.verified_key is not None and decoded.verified_key in candidates:
        return decoded.verified_key
    for public_key in candidates:
        if verify_signature(public_key, decoded.signing_input, decoded.signature):
            return public_key
    raise SignatureError("invalid signature")


def sign_operation(
    typ: str, payload: Mapping[str, object], keypair: Signer, kid: str
) -> SignedOperation:
    """Sign an operation payload; header is ``{alg, typ, kid, cid}`` in that order."""
    cid = cid_from_cbor(encode_canonical(payload))
    header = {"alg": "EdDSA", "typ": typ, "kid": kid, "cid": cid}
    return SignedOperation(sign_jws(header, payload, keypair), cid)
