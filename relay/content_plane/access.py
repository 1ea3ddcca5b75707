"""Authentication and authorization for the content plane (WEB-RELAY.md
"Content Plane Access", "Deletion Semantics"; PROTOCOL.md "Credentials").

Role: three decisions over values the caller loaded -
- ``authenticate``: a DID auth token, audience = this relay's DID, verified
  against the signer's current state at wall-clock ``now_s``;
- ``authorize_read``: the chain creator, or the subject of a
  ``DFOSContentRead`` VC-JWT issued by the creator (broad, or narrowed to this
  contentId), temporally valid at ``now_s`` and signed by a current key of a
  live creator;
- ``authorize_write``: the chain creator, or the signer of the operation whose
  document is uploaded (delegated upload), while the creator is live.

Not checked here: whether the chain or operation exists (the route answers
404 first) and whether the uploaded bytes match (``documents``).
"""

from __future__ import annotations

from relay.protocol import (
    DFOS_CONTENT_READ,
    AuthClaims,
    ContentState,
    IdentityState,
    KeyNotFoundError,
    ProtocolError,
    decode_jws,
    split_kid,
    verify_auth_token,
    verify_credential,
)

from .errors import Forbidden, Unauthenticated
from .keys import current_state_resolver

__all__ = ["auth_token_signer", "authenticate", "authorize_read", "authorize_write"]


def auth_token_signer(token: str) -> str:
    """The DID named by an auth token's ``kid`` (whose state must be loaded).

    Nothing is verified yet; ``authenticate`` does that.
    """
    try:
        kid = decode_jws(token).kid
        did, _ = split_kid(kid) if kid is not None else (None, "")
    except ProtocolError as exc:
        raise Unauthenticated(f"malformed auth token: {exc}") from exc
    if did is None:
        raise Unauthenticated("auth token kid must be a DID URL")
    return did


def authenticate(
    token: str,
    identity: IdentityState | None,
    audience: str,
    now_s: int,
    max_lifetime_s: int | None,
) -> AuthClaims:
    """Verify ``token`` against ``identity`` (the kid DID's head state, if known)."""
    if identity is None:
        raise Unauthenticated("the auth token's identity is unknown to this relay")
    if identity.is_deleted:
        raise Unauthenticated("the auth token's identity is deleted")
    resolver = current_state_resolver({identity.did: identity})
    try:
        return verify_auth_token(token, resolver, audience, now_s, max_lifetime_s)
    except KeyNotFoundError as exc:
        raise Unauthenticated(
            "the auth token is not signed by a current key of its identity"
        ) from exc
    except ProtocolError as exc:
        raise Unauthenticated(f"invalid auth token: {exc}") from exc


def authorize_read(
    caller: str,
    content: ContentState,
    credential: str | None,
    creator: IdentityState | None,
    now_s: int,
) -> None:
    """Allow the creator; anyone else needs a read credential from the creator."""
    if caller == content.creator_did:
        return
    if credential is None:
        raise Forbidden(
            "reading needs a DFOSContentRead credential from the creator (X-Credential)"
        )
    if creator is None or creator.is_deleted:
        raise Forbidden("the content creator's identity is deleted; its credentials are revoked")
    resolver = current_state_resolver({creator.did: creator})
    try:
        granted = verify_credential(credential, resolver, now_s, DFOS_CONTENT_READ, caller)
    except KeyNotFoundError as exc:
        raise Forbidden(
            "the credential is not signed by a current key of the content creator"
        ) from exc
    except ProtocolError as exc:
        raise Forbidden(f"invalid credential: {exc}") from exc
    if granted.iss != content.creator_did:  # the resolver already enforces this
        raise Forbidden("the credential was not issued by the content creator")
    if granted.content_id is not None and granted.content_id != content.content_id:
        raise Forbidden("the credential is narrowed to another content chain")


def authorize_write(
    caller: str,
    content: ContentState,
    operation_signer: str,
    creator: IdentityState | None,
) -> None:
    """Allow the creator, or the signer of the operation (delegated upload).

    A delegate's authority derives from the creator, so it ends when the
    creator's identity is deleted.
    """
    if creator is None or creator.is_deleted:
        raise Forbidden("the content creator's identity is deleted; the chain is sealed")
    if caller not in (content.creator_did, operation_signer):
        raise Forbidden("only the chain creator or the operation's signer may upload its document")
