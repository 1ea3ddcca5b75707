"""Countersignature verification (PROTOCOL.md "Countersignatures").

Role: verify a witness attestation that references any operation by CID.
Verification is stateless: signature + CID integrity + payload schema.

Invariants: ``typ`` did:dfos:countersign, ``kid`` = ``<payload did>#<key>``
(a witness signs with its own key), header ``cid`` matches, Ed25519 signature
by a key the resolver returns for the ``kid``.
Not checked (relay-level): that the target exists, witness != target author,
one countersignature per witness per target, deleted witnesses. No future
guard is specified for countersignatures, so none is applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from .envelope import (
    TYP_COUNTERSIGN,
    KeyResolver,
    check_cid,
    expect_typ,
    signer_did,
    verify_with_resolver,
)
from .jws import DecodedJws
from .payloads import CountersignPayload, parse_countersign

__all__ = ["VerifiedCountersign", "verify_countersign"]


@dataclass(frozen=True, slots=True)
class VerifiedCountersign:
    cid: str
    payload: CountersignPayload


def verify_countersign(
    decoded: DecodedJws, resolve_key: KeyResolver, now_ms: int
) -> VerifiedCountersign:
    """Verify a countersignature JWS; ``now_ms`` is accepted for symmetry, unused."""
    expect_typ(decoded, TYP_COUNTERSIGN)
    payload = parse_countersign(decoded.payload)
    did = signer_did(decoded, payload.did)
    cid, _ = check_cid(decoded)
    verify_with_resolver(decoded, resolve_key, did)
    return VerifiedCountersign(cid, payload)
