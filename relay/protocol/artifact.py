"""Artifact verification (PROTOCOL.md "Artifacts").

Role: verify a standalone, immutable, CID-addressed signed document.

Invariants: ``typ`` did:dfos:artifact, ``kid`` = ``<payload did>#<key>``,
``content.$schema`` is a string, header ``cid`` matches, the canonical CBOR
payload is at most ``ARTIFACT_MAX_CBOR_BYTES`` (16384, a protocol constant),
``createdAt`` at most 24h ahead of ``now_ms`` (same guard as chain ops),
Ed25519 signature by a key the resolver returns for the ``kid``.
Not checked: validation of ``content`` against its ``$schema`` and whether
the identity is deleted (relay concerns).
"""

from __future__ import annotations

from dataclasses import dataclass

from .envelope import (
    TYP_ARTIFACT,
    KeyResolver,
    check_cid,
    check_not_future,
    expect_typ,
    signer_did,
    verify_with_resolver,
)
from .errors import MalformedError
from .jws import DecodedJws
from .payloads import ARTIFACT_MAX_CBOR_BYTES, ArtifactPayload, parse_artifact

__all__ = ["VerifiedArtifact", "verify_artifact"]


@dataclass(frozen=True, slots=True)
class VerifiedArtifact:
    cid: str
    payload: ArtifactPayload
    cbor_size: int


def verify_artifact(decoded: DecodedJws, resolve_key: KeyResolver, now_ms: int) -> VerifiedArtifact:
    """Verify an artifact JWS against the resolver and the verifier's clock ``now_ms``."""
    expect_typ(decoded, TYP_ARTIFACT)
    payload = parse_artifact(decoded.payload)
    did = signer_did(decoded, payload.did)
    cid, cbor = check_cid(decoded)
    if len(cbor) > ARTIFACT_MAX_CBOR_BYTES:
        raise MalformedError(f"artifact payload exceeds {ARTIFACT_MAX_CBOR_BYTES} CBOR bytes")
    check_not_future(payload.created_at_ms, now_ms)
    verify_with_resolver(decoded, resolve_key, did)
    return VerifiedArtifact(cid, payload, len(cbor))
