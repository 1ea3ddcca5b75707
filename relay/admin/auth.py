"""Who may call ``/admin/``: an operator DID proving itself with an *admin*
token, a DID auth token (PROTOCOL.md "Auth Tokens") whose audience is this
relay's admin plane, ``<relay DID>#admin``.

A call is admitted when its Bearer token
- has ``aud`` = ``<relay DID>#admin``, as a single string;
- names (``kid``) a DID listed as an operator of this relay;
- verifies against that identity's *current* keys as held on this relay
  (a rotated-out key, a deleted identity or an identity this relay does not
  hold are refused: the operator's identity chain must be ingested here);
- has ``iat <= now < exp`` and a lifetime of at most the admin maximum
  (``--admin-token-max-lifetime``, 300 s).

Why a separate audience: a content-plane token (``aud`` = the relay DID)
is shown to reader apps, proxies and logs; it must not also open the admin
plane. With its own audience an admin token is refused by the content plane
as any wrong-audience token is (no change there), and a content-plane
token here. An ``aud`` array is refused even when it names the admin
audience: one token naming both planes would be a key to both.

Reuse: a token may be presented again while it is valid (bearer semantics,
as on the content plane). The DFOS auth token carries no nonce, and a
single-use rule keyed on the token's hash would need a store shared by every
worker; the short maximum lifetime bounds the replay window instead, and
past ``exp`` every replay is refused. Each admitted call names the token
(``token_id``, a hash prefix) in its audit line, so reuse is visible.

401: missing, malformed, expired, wrong audience (a content-plane token
included), unknown or rotated-out key, deleted identity. 403: a valid token
of a DID that is not an operator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass

from relay.content_plane import Unauthenticated, auth_token_signer, authenticate
from relay.protocol import IdentityState, ProtocolError, decode_jws

TOKEN_ID_HEX = 16
ADMIN_AUDIENCE_FRAGMENT = "#admin"  # aud = <relay DID>#admin: the admin plane of that relay


def admin_audience(relay_did: str) -> str:
    """The ``aud`` of an admin token for the relay whose DID is ``relay_did``."""
    return relay_did + ADMIN_AUDIENCE_FRAGMENT


class AdminRefused(Exception):
    """The call is not admitted: ``status`` 401 or 403, ``str()`` for the client."""

    def __init__(self, status: int, message: str, did: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.did = did  # the DID the token named, when it could be read


@dataclass(frozen=True, slots=True)
class AdminCaller:
    did: str
    token_id: str  # a prefix of the token's SHA-256, for the audit trail
    expires_at_s: int


def token_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:TOKEN_ID_HEX]


def token_signer(token: str) -> str:
    """The DID the token names (nothing verified yet); 401 when unreadable."""
    try:
        return auth_token_signer(token)
    except Unauthenticated as exc:
        raise AdminRefused(401, str(exc)) from exc


def authenticate_admin(
    token: str,
    identity: IdentityState | None,
    relay_did: str,
    now_s: int,
    max_lifetime_s: int,
    operators: Collection[str],
) -> AdminCaller:
    """Verify ``token`` against ``identity`` (the state of the DID it names)."""
    did = token_signer(token)
    audience = admin_audience(relay_did)
    _check_audience(token, relay_did, audience, did)
    try:
        claims = authenticate(token, identity, audience, now_s, max_lifetime_s)
    except Unauthenticated as exc:
        raise AdminRefused(401, str(exc), did) from exc
    if claims.iss not in operators:
        raise AdminRefused(403, f"{claims.iss} is not an operator of this relay", claims.iss)
    return AdminCaller(claims.iss, token_id(token), claims.exp)


def _check_audience(token: str, relay_did: str, audience: str, did: str) -> None:
    """401 unless ``aud`` is exactly the admin audience (a string, not an array);
    a content-plane token is named as such, so its holder knows what to mint."""
    try:
        aud = decode_jws(token).payload.get("aud")
    except ProtocolError as exc:  # token_signer decoded it already; kept for safety
        raise AdminRefused(401, f"malformed auth token: {exc}", did) from exc
    if aud == audience:
        return
    if aud == relay_did or (isinstance(aud, list) and relay_did in aud):
        raise AdminRefused(
            401,
            f"a content-plane auth token (aud {relay_did!r}) is not an admin token: "
            f"an admin token's aud is {audience!r}",
            did,
        )
    raise AdminRefused(401, f"an admin token's aud must be the string {audience!r}", did)
