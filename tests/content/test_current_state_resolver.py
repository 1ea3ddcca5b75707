"""The current-state key resolver (WEB-RELAY.md "Key Resolution"): only keys
in an identity's head state resolve; deleted identities resolve nothing."""

from __future__ import annotations

import pytest

from relay.content_plane import current_state_resolver
from relay.protocol import IdentityState, KeyNotFoundError, MultikeyPublicKey, reference_keypair

KEY_1, KEY_2 = reference_keypair(1), reference_keypair(2)
DID = "did:dfos:e3vvtck42d4eacdnzvtrn6"  # reference identity (identity-genesis vector)


def _state(*, deleted: bool = False) -> IdentityState:
    key = MultikeyPublicKey(KEY_2.key_id, "Multikey", KEY_2.multikey)
    return IdentityState(DID, deleted, (key,), (key,), (key,))


def test_current_key_resolves_to_its_public_key() -> None:
    resolve = current_state_resolver({DID: _state()})
    assert list(resolve(f"{DID}#{KEY_2.key_id}")) == [KEY_2.public_key]


@pytest.mark.parametrize(
    "kid",
    [
        f"{DID}#{KEY_1.key_id}",  # rotated out (genesis key of the rotation vector)
        f"did:dfos:nzkf838efr424433rn2rzk#{KEY_2.key_id}",  # identity not given
        KEY_2.key_id,  # bare kid: live auth needs a DID URL
        "did:web:example.com#key",
    ],
    ids=["rotated-out", "unknown-identity", "bare-kid", "not-a-dfos-did"],
)
def test_other_kids_do_not_resolve(kid: str) -> None:
    with pytest.raises(KeyNotFoundError):
        current_state_resolver({DID: _state()})(kid)


def test_deleted_identity_resolves_nothing() -> None:
    with pytest.raises(KeyNotFoundError, match="deleted"):
        current_state_resolver({DID: _state(deleted=True)})(f"{DID}#{KEY_2.key_id}")
