"""Who may call ``/admin/``: an operator DID proving itself with a DID auth
token (the content plane's format, PROTOCOL.md "Auth Tokens").

A call is admitted when its Bearer token
- names (``kid``) a DID listed as an operator of this relay;
- verifies against that identity's *current* keys as held on this relay
  (a rotated-out key, a deleted identity or an identity this relay does not
  hold are refused: the operator's identity chain must be ingested here);
- has audience = this relay's DID, ``iat <= now < exp``, and a lifetime of
  at most the admin maximum (``--admin-token-max-lifetime``, 300 s).

Reuse: a token may be presented again while it is valid (bearer semantics,
as on the content plane). The DFOS auth token carries no nonce, and a
single-use rule keyed on the token's hash would need a store shared by every
worker; the short maximum lifetime bounds the replay window instead, and
past ``exp`` every replay is refused. Each admitted call names the token
(``token_id``, a hash prefix) in its audit line, so reuse is visible.

401: missing, malformed, expired, wrong audience, unknown or rotated-out
key, deleted identity. 403: a valid token of a DID that is not an operator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass

from relay.content_plane import Unauthenticated, auth_token_signer, authenticate
from relay.protocol import IdentityState

TOKEN_ID_HEX = 16


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
    try:
        claims = authenticate(token, identity, relay_did, now_s, max_lifetime_s)
    except Unauthenticated as exc:
        raise AdminRefused(401, str(exc), did) from exc
    if claims.iss not in operators:
        raise AdminRefused(403, f"{claims.iss} is not an operator of this relay", claims.iss)
    return AdminCaller(claims.iss, token_id(token), claims.exp)
