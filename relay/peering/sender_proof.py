"""Sender proofs: the pure rules (additive to v0.7.1; README "A large mesh").

A relay pushing to a peer's POST /operations names itself in
``RELAY_SENDER_HEADER`` and proves it in ``RELAY_SENDER_PROOF_HEADER`` with
a DFOS auth token (PROTOCOL.md "Auth Tokens"): ``iss`` = ``sub`` = its relay
DID, ``kid`` a key of that identity, ``aud`` = ``<receiving relay's DID>#push``,
short-lived. The audience is the push plane's own, as the admin plane's is
(``<DID>#admin``): a content-plane token (``aud`` = the relay DID) is no
sender proof, and a sender proof opens no content plane. The receiver
takes the push as the named peer's (echo suppression, fan-out hops) only if
the token verifies against that identity's current keys as held in its own
store.

Role: ``ProofMinter`` keeps one token per audience and renews it when less
than ``SENDER_PROOF_RENEW_S`` is left (signing per push would cost an
Ed25519 signature per push, and a fresh token per push would defeat the
receiver's cache); ``check_sender_proof`` is the receiver's decision over
values it loaded (the identity state, its own DID, the time).

Not checked here: where the identity state came from (the caller loads it
from the store: a chain that verified on ingest) and replay. A proof is a
bearer token for routing only: whoever sees it can replay it to the same
receiver until it expires, which is why it is short-lived and bound to one
audience, and why relays should talk over TLS. Nor that a peer owns the
DID its well-known document claims (``relay.peering.directory``): a peer
claiming another relay's DID is sent proofs for that relay, and could
replay them to it while they last. The ops themselves are verified on
ingest whatever the headers say.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from relay.content_plane.keys import current_state_resolver
from relay.protocol import IdentityState, KeyNotFoundError, ProtocolError, verify_auth_token

SENDER_PROOF_LIFETIME_S = 300  # a minted proof is valid this long after now...
SENDER_PROOF_BACKDATE_S = 60  # ...and from this long before (a receiver's clock may lag)
SENDER_PROOF_RENEW_S = 120  # a proof with less than this left is replaced before a push
SENDER_PROOF_MAX_LIFETIME_S = 900  # longest exp - iat a receiver accepts

PUSH_AUDIENCE_FRAGMENT = "#push"  # aud = <receiving relay DID>#push

# (audience, iat, exp) -> an auth token signed by the relay identity key
SignAuthToken = Callable[[str, int, int], str]


def push_audience(relay_did: str) -> str:
    """The ``aud`` of a sender proof for pushes to the relay ``relay_did``."""
    return relay_did + PUSH_AUDIENCE_FRAGMENT


class SenderProofError(Exception):
    """The proof does not show that the push comes from the named relay."""


@dataclass(frozen=True, slots=True)
class ProvenSender:
    """A verified proof: ``did`` sent it, valid until ``expires_s``."""

    did: str
    expires_s: int


def check_sender_proof(
    token: str, sender_did: str, identity: IdentityState | None, audience: str, now_s: int
) -> ProvenSender:
    """Verify ``token`` as a proof that ``sender_did`` pushes to ``audience``
    (this relay's DID; the token names its push audience) at ``now_s``,
    against ``identity``, the sender's head state as this relay holds it
    (None: not held). Raises ``SenderProofError``."""
    if identity is None:
        raise SenderProofError(f"identity {sender_did} is not held here")
    if identity.did != sender_did:
        raise SenderProofError("identity state of another DID")
    if identity.is_deleted:
        raise SenderProofError(f"identity {sender_did} is deleted")
    resolver = current_state_resolver({sender_did: identity})
    try:
        claims = verify_auth_token(
            token, resolver, push_audience(audience), now_s, SENDER_PROOF_MAX_LIFETIME_S
        )
    except KeyNotFoundError as exc:
        raise SenderProofError(f"not signed by a current key of {sender_did}") from exc
    except ProtocolError as exc:
        raise SenderProofError(str(exc)) from exc
    if claims.iss != sender_did:  # the resolver only knows sender_did: defence in depth
        raise SenderProofError("issued by another DID")
    return ProvenSender(claims.iss, claims.exp)


class ProofMinter:
    """One proof per peer DID (``audience``), reused until it nears expiry.

    Holds at most one token per peer DID pushed to (configured and
    discovered peers: bounded by the peer list)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, int]] = {}  # audience -> (token, exp)
        self.minted = 0

    def proof_for(self, audience: str, sign: SignAuthToken, now_s: int) -> str:
        held = self._held.get(audience)
        if held is not None and held[1] - now_s > SENDER_PROOF_RENEW_S:
            return held[0]
        exp = now_s + SENDER_PROOF_LIFETIME_S
        token = sign(push_audience(audience), now_s - SENDER_PROOF_BACKDATE_S, exp)
        self._held[audience] = (token, exp)
        self.minted += 1
        return token
