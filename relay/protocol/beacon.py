"""Beacon verification (PROTOCOL.md "Beacons").

Role: verify a signed merkle-root announcement. Beacons are not chained:
the relay keeps the newest per DID (replace-on-newer is the relay's rule).

Invariants: ``typ`` did:dfos:beacon, ``kid`` = ``<payload did>#<key>``, header
``cid`` matches, ``createdAt`` at most 5 minutes ahead of ``now_ms`` (stricter
than chain operations), Ed25519 signature by a key the resolver returns for
the ``kid``. Not checked: whether the identity is deleted (relay concern).
"""

from __future__ import annotations

from dataclasses import dataclass

from .envelope import (
    BEACON_FUTURE_GUARD_MS,
    TYP_BEACON,
    KeyResolver,
    check_cid,
    check_not_future,
    expect_typ,
    signer_did,
    verify_with_resolver,
)
from .jws import DecodedJws
from .payloads import BeaconPayload, parse_beacon

__all__ = ["VerifiedBeacon", "verify_beacon"]


@dataclass(frozen=True, slots=True)
class VerifiedBeacon:
    cid: str
    payload: BeaconPayload


def verify_beacon(decoded: DecodedJws, resolve_key: KeyResolver, now_ms: int) -> VerifiedBeacon:
    """Verify a beacon JWS against the resolver and the verifier's clock ``now_ms``."""
    expect_typ(decoded, TYP_BEACON)
    payload = parse_beacon(decoded.payload)
    did = signer_did(decoded, payload.did)
    cid, _ = check_cid(decoded)
    check_not_future(payload.created_at_ms, now_ms, BEACON_FUTURE_GUARD_MS)
    verify_with_resolver(decoded, resolve_key, did)
    return VerifiedBeacon(cid, payload)
