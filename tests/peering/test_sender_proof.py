"""Sender proofs, the pure rules (``relay.peering.sender_proof``): a proof is
a DFOS auth token from the pushing relay's identity for the receiving
relay's DID, within its lifetime; the pusher reuses one per audience until
it nears expiry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from relay.content_plane import Unauthenticated, authenticate
from relay.peering.sender_proof import (
    SENDER_PROOF_BACKDATE_S,
    SENDER_PROOF_LIFETIME_S,
    SENDER_PROOF_MAX_LIFETIME_S,
    SENDER_PROOF_RENEW_S,
    ProofMinter,
    SenderProofError,
    check_sender_proof,
    push_audience,
)
from relay.protocol import Ed25519Keypair, IdentityState, create_auth_token, verify_identity_chain
from relay.relay_identity import new_relay_identity

NOW = 1_800_000_000


GENESIS: dict[str, str] = {}  # relay DID -> its identity genesis token


def relay_identity(n: int) -> tuple[Ed25519Keypair, IdentityState]:
    keypair = Ed25519Keypair.from_seed(bytes([n]) * 32)
    record = new_relay_identity(keypair, {"name": f"relay {n}"}, 1_700_000_000_000)
    GENESIS[record.did] = record.genesis_token
    return keypair, verify_identity_chain([record.genesis_token], NOW * 1000).state


SENDER_KEY, SENDER = relay_identity(1)
_, RECEIVER = relay_identity(2)
OTHER_KEY, OTHER = relay_identity(3)


def proof(
    keypair: Ed25519Keypair = SENDER_KEY,
    iss: str = SENDER.did,
    aud: str = push_audience(RECEIVER.did),
    iat: int = NOW - SENDER_PROOF_BACKDATE_S,
    exp: int = NOW + SENDER_PROOF_LIFETIME_S,
) -> str:
    return create_auth_token(keypair, f"{iss}#{keypair.key_id}", iss, aud, iat, exp)


def test_a_proof_from_the_senders_key_for_this_relay_is_accepted() -> None:
    proven = check_sender_proof(proof(), SENDER.did, SENDER, RECEIVER.did, NOW)
    assert (proven.did, proven.expires_s) == (SENDER.did, NOW + SENDER_PROOF_LIFETIME_S)


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(proof(aud=push_audience(OTHER.did)), id="another-relays-audience"),
        pytest.param(proof(aud=push_audience(SENDER.did)), id="the-senders-own-audience"),
        pytest.param(proof(aud=RECEIVER.did), id="a-content-plane-token"),
        pytest.param(proof(aud=f"{RECEIVER.did}#admin"), id="an-admin-token"),
        pytest.param(proof(iat=NOW - 400, exp=NOW), id="expired"),
        pytest.param(proof(iat=NOW + 10), id="issued-in-the-future"),
        pytest.param(
            proof(iat=NOW - 10, exp=NOW - 10 + SENDER_PROOF_MAX_LIFETIME_S + 1), id="too-long-lived"
        ),
        pytest.param(proof(keypair=OTHER_KEY), id="signed-by-another-key"),
        pytest.param(proof(keypair=OTHER_KEY, iss=OTHER.did), id="issued-by-another-relay"),
        pytest.param("not.a.token", id="malformed"),
    ],
)
def test_a_proof_that_does_not_show_this_push_from_the_sender_is_refused(token: str) -> None:
    with pytest.raises(SenderProofError):
        check_sender_proof(token, SENDER.did, SENDER, RECEIVER.did, NOW)


def test_an_identity_not_held_or_deleted_proves_nothing() -> None:
    with pytest.raises(SenderProofError, match="not held"):
        check_sender_proof(proof(), SENDER.did, None, RECEIVER.did, NOW)
    with pytest.raises(SenderProofError, match="deleted"):
        check_sender_proof(proof(), SENDER.did, replace(SENDER, is_deleted=True), RECEIVER.did, NOW)
    with pytest.raises(SenderProofError):  # a state of another DID is not the sender's
        check_sender_proof(proof(), SENDER.did, OTHER, RECEIVER.did, NOW)


def test_the_minter_reuses_a_proof_per_audience_until_it_nears_expiry() -> None:
    minter = ProofMinter()
    signed: list[tuple[str, int, int]] = []

    def sign(audience: str, iat: int, exp: int) -> str:
        signed.append((audience, iat, exp))
        return proof(aud=audience, iat=iat, exp=exp)

    first = minter.proof_for(RECEIVER.did, sign, NOW)
    assert signed == [
        (push_audience(RECEIVER.did), NOW - SENDER_PROOF_BACKDATE_S, NOW + SENDER_PROOF_LIFETIME_S)
    ]
    later = NOW + SENDER_PROOF_LIFETIME_S - SENDER_PROOF_RENEW_S - 1
    assert minter.proof_for(RECEIVER.did, sign, later) == first  # reused
    assert minter.proof_for(OTHER.did, sign, NOW) != first  # one per audience
    renewed = minter.proof_for(RECEIVER.did, sign, later + 1)
    assert renewed != first and minter.minted == 3
    # a renewed proof is valid for at least the renewal margin
    assert check_sender_proof(
        renewed, SENDER.did, SENDER, RECEIVER.did, later + 1 + SENDER_PROOF_RENEW_S
    )


def test_a_sender_proof_opens_no_content_plane() -> None:
    """Its audience is the push plane's: the content plane (aud = the relay
    DID) refuses it as any token of another audience."""
    with pytest.raises(Unauthenticated, match="aud"):
        authenticate(proof(), SENDER, RECEIVER.did, NOW, SENDER_PROOF_MAX_LIFETIME_S)
