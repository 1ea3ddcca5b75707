"""Key ids of an identity op name one key each: no key id twice in one role
(create and update), and in a genesis one key id never names two different
public keys across roles - as the reference verifiers the relay spec names
(``verifyIdentityChain`` for a genesis, ``verifyIdentityExtensionFromTrustedState``
for an extension) require. A ``did#keyId`` verification method of the DID
document (DID-METHOD.md 4.2) must mean one key."""

from __future__ import annotations

import pytest

from relay.protocol import (
    TYP_IDENTITY,
    Ed25519Keypair,
    MalformedError,
    MultikeyPublicKey,
    VerifiedIdentityOp,
    decode_jws,
    format_timestamp,
    identity_create_payload,
    identity_update_payload,
    sign_operation,
    verify_identity_extension,
    verify_identity_genesis,
)
from relay.protocol.builders import KeyLike

from .conftest import NOW_MS, ref_key

K1, K2, K3 = ref_key(1), ref_key(2), ref_key(3)
T0 = NOW_MS - 3_600_000


def _genesis(
    auth: list[KeyLike], controllers: list[KeyLike], signer: Ed25519Keypair = K1, kid: str = ""
) -> VerifiedIdentityOp:
    payload = identity_create_payload(auth, [K1], controllers, format_timestamp(T0))
    token = sign_operation(TYP_IDENTITY, payload, signer, kid or signer.key_id).token
    return verify_identity_genesis(decode_jws(token), NOW_MS)


def _update(parent: VerifiedIdentityOp, auth: list[KeyLike], controllers: list[KeyLike]) -> None:
    payload = identity_update_payload(
        parent.cid, auth, [K2], controllers, format_timestamp(T0 + 60_000)
    )
    token = sign_operation(TYP_IDENTITY, payload, K1, f"{parent.did}#{K1.key_id}").token
    verify_identity_extension(decode_jws(token), parent.did, parent.cid, parent.state, T0, NOW_MS)


def test_genesis_key_id_must_not_repeat_in_a_role() -> None:
    with pytest.raises(MalformedError, match="repeat"):
        _genesis([K1], [K1, K1])


def test_update_key_id_must_not_repeat_in_a_role() -> None:
    parent = _genesis([K1], [K1])
    with pytest.raises(MalformedError, match="repeat"):
        _update(parent, [K2, K2], [K2])


def test_genesis_key_id_must_name_one_key_across_roles() -> None:
    # "key_x" is K3 as an auth key and K1 as the controller that signs: the DID
    # document would show K3 as the capabilityInvocation key of did#key_x.
    auth = MultikeyPublicKey.from_public_key(K3.public_key, "key_x")
    controller = MultikeyPublicKey.from_public_key(K1.public_key, "key_x")
    with pytest.raises(MalformedError, match="key_x"):
        _genesis([auth], [controller], kid="key_x")


def test_same_key_in_several_roles_is_fine() -> None:
    op = _genesis([K1, K3], [K1])
    _update(op, [K2, K1], [K2, K1])
