"""Content chain creator sovereignty: the genesis signer owns the chain; any other
signer needs a DFOSContentWrite VC-JWT issued by the creator to that signer, valid
at the op's createdAt (not wall clock) and, if narrowed, naming this chain."""

from __future__ import annotations

import pytest

from relay.protocol import (
    DFOS_CONTENT_READ,
    TYP_CONTENT,
    AuthorizationError,
    KeyNotFoundError,
    content_update_payload,
    decode_jws,
    sign_operation,
    verify_content_chain,
)

from .conftest import CREATOR_DID, DELEGATE_DID, NOW_MS, reference_resolver, vector
from .content_helpers import (
    DOC_B,
    K1,
    K3,
    RESOLVE,
    T0,
    delegate_update,
    extend,
    genesis,
    kid_of,
    ts,
    write_credential,
)


def test_delegated_vector_signers() -> None:
    ops = verify_content_chain(vector("content-delegated")["chain"], RESOLVE, NOW_MS).operations
    assert [op.signer_did for op in ops] == [CREATOR_DID, DELEGATE_DID]
    assert ops[1].operation.authorization == vector("content-delegated")["authorization"]


def test_delegated_vector_needs_the_delegate_identity() -> None:
    resolve = reference_resolver(with_delegate=False)
    with pytest.raises(KeyNotFoundError) as info:
        verify_content_chain(vector("content-delegated")["chain"], resolve, NOW_MS)
    assert info.value.did == DELEGATE_DID


def _resign_delegated_update(authorization: str) -> str:
    payload = dict(decode_jws(vector("content-delegated")["chain"][1]).payload)
    payload["authorization"] = authorization
    return sign_operation(TYP_CONTENT, payload, K3, kid_of(DELEGATE_DID, K3)).token


def test_broad_write_credential_authorizes_any_chain_of_the_creator() -> None:
    chain = [
        vector("content-delegated")["chain"][0],
        _resign_delegated_update(vector("credential-write")["broadCredential"]),
    ]
    assert verify_content_chain(chain, RESOLVE, NOW_MS).state.length == 2


def test_credential_narrowed_to_another_chain_is_rejected() -> None:
    narrow = vector("credential-write")["narrowCredential"]  # narrowed to a82z92a3hndk6c97thcrn8
    chain = [vector("content-delegated")["chain"][0], _resign_delegated_update(narrow)]
    with pytest.raises(AuthorizationError, match="different content chain"):
        verify_content_chain(chain, RESOLVE, NOW_MS)


def test_read_credential_does_not_authorize_writes() -> None:
    chain = [
        vector("content-delegated")["chain"][0],
        _resign_delegated_update(vector("credential-read")["credential"]),
    ]
    with pytest.raises(AuthorizationError, match="DFOSContentWrite"):
        verify_content_chain(chain, RESOLVE, NOW_MS)


# --- creator sovereignty -----------------------------------------------------------------------


def test_delegate_without_credential_is_rejected() -> None:
    with pytest.raises(AuthorizationError, match="no authorization"):
        extend(genesis(), delegate_update(genesis(), None), signer=K3)


def test_delegate_without_credential_passes_when_not_enforced() -> None:
    head = extend(genesis(), delegate_update(genesis(), None), signer=K3, enforce=False)
    assert head.signer_did == DELEGATE_DID and head.state.creator_did == CREATOR_DID


def test_creator_needs_no_credential_with_any_of_its_keys() -> None:
    g = genesis()
    head = extend(g, content_update_payload(CREATOR_DID, g.cid, DOC_B, ts(1)), signer=K1)
    assert head.state.current_document_cid == DOC_B


def test_credential_validity_uses_op_created_at_not_wall_clock() -> None:
    g = genesis()
    # Expired long before NOW_MS, but valid at the op's createdAt.
    credential = write_credential(exp=(T0 + 120_000) // 1000)
    head = extend(g, delegate_update(g, credential, at=60_000), signer=K3)
    assert head.state.length == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"exp": (T0 + 60_000) // 1000}, "expired", id="expired-at-created-at"),
        pytest.param({"iat": (T0 + 120_000) // 1000}, "not yet valid", id="issued-after-op"),
        pytest.param(
            {"content_id": "a82z92a3hndk6c97thcrn8"},
            "different content chain",
            id="narrowed-elsewhere",
        ),
        pytest.param({"sub": "did:dfos:e3vvtck42d4eacdnzvtrn7"}, "subject", id="other-subject"),
        pytest.param({"credential_type": DFOS_CONTENT_READ}, "DFOSContentWrite", id="read-type"),
        pytest.param(
            {"keypair": K3, "kid": kid_of(DELEGATE_DID, K3), "iss": DELEGATE_DID},
            "chain creator",
            id="self-issued",
        ),
        pytest.param({"keypair": K3}, "signature", id="forged-by-other-key"),
    ],
)
def test_invalid_delegation_is_rejected(overrides: dict[str, object], message: str) -> None:
    g = genesis()
    with pytest.raises(AuthorizationError, match=message):
        extend(g, delegate_update(g, write_credential(**overrides), at=60_000), signer=K3)


def test_credential_narrowed_to_this_chain_is_accepted() -> None:
    g = genesis()
    credential = write_credential(content_id=g.content_id)
    assert extend(g, delegate_update(g, credential), signer=K3).state.current_document_cid == DOC_B
