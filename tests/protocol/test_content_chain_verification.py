"""Content chains: kid DID = payload did, keys via the caller's resolver, links by
previousOperationCID, strictly increasing createdAt, 24h future guard, nothing
after delete; update sets or clears the document, delete clears it."""

from __future__ import annotations

import pytest

from relay.protocol import (
    FUTURE_GUARD_MS,
    ChainError,
    ContentState,
    FutureTimestampError,
    KeyNotFoundError,
    MalformedError,
    SignatureError,
    b64url_encode,
    content_create_payload,
    content_delete_payload,
    content_update_payload,
    decode_jws,
    format_timestamp,
    sign_operation,
    verify_content_chain,
    verify_content_genesis,
)

from .conftest import CREATOR_DID, DELEGATE_DID, NOW_MS, vector
from .content_helpers import (
    DOC_A,
    DOC_B,
    K2,
    K3,
    RESOLVE,
    extend,
    genesis,
    kid_of,
    ts,
)

# --- vectors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["content-lifecycle", "content-delete", "content-delegated"])
def test_vector_chains_verify_to_expected_state(name: str) -> None:
    v = vector(name)
    result = verify_content_chain(v["chain"], RESOLVE, NOW_MS)
    expected = v["expected"]
    assert result.content_id == result.state.content_id == expected["contentId"]
    assert result.state.is_deleted is expected["isDeleted"]
    assert result.state.current_document_cid == expected["currentDocumentCID"]
    assert result.state.length == expected["length"]
    assert result.state.creator_did == expected.get("creatorDID", CREATOR_DID)
    assert result.state.genesis_cid == decode_jws(v["chain"][0]).header_cid
    assert result.state.head_cid == decode_jws(v["chain"][-1]).header_cid


def test_lifecycle_matches_spec_verified_state() -> None:
    state = verify_content_chain(vector("content-lifecycle")["chain"], RESOLVE, NOW_MS).state
    assert state.to_json() == {
        "contentId": "a82z92a3hndk6c97thcrn8",
        "genesisCID": "bafyreiaedhjq64aajpwociahl5w37j6uoxr5mojoq5dnah6fpvxr5d4lxu",
        "headCID": "bafyreih6e5cbjitpozhzhgmfktmiohmxyn3ucwhqd3mjixizvwmlhv7hm4",
        "isDeleted": False,
        "currentDocumentCID": "bafyreidh7e36cvwy3uw5ypitcqk7uoktbkkkj7e6hxhky4o75rxn7kxilu",
        "length": 2,
        "creatorDID": CREATOR_DID,
    }


# --- chain rules -------------------------------------------------------------------------------


def test_genesis_state() -> None:
    g = genesis()
    assert g.state == ContentState(g.content_id, g.cid, g.cid, False, DOC_A, 1, CREATOR_DID)


def test_update_can_clear_and_restore_document() -> None:
    g = genesis()
    cleared = extend(g, content_update_payload(CREATOR_DID, g.cid, None, ts(1)))
    assert cleared.state.current_document_cid is None and not cleared.state.is_deleted
    restored = extend(cleared, content_update_payload(CREATOR_DID, cleared.cid, DOC_B, ts(2)))
    assert restored.state.current_document_cid == DOC_B and restored.state.length == 3


def test_no_operation_after_delete() -> None:
    g = genesis()
    deleted = extend(g, content_delete_payload(CREATOR_DID, g.cid, ts(1)))
    assert deleted.state.is_deleted and deleted.state.current_document_cid is None
    with pytest.raises(ChainError, match="deleted"):
        extend(deleted, content_update_payload(CREATOR_DID, deleted.cid, DOC_B, ts(2)))


@pytest.mark.parametrize("offset", [pytest.param(0, id="equal"), pytest.param(-1000, id="earlier")])
def test_created_at_must_strictly_increase(offset: int) -> None:
    g = genesis()
    with pytest.raises(ChainError, match="later"):
        extend(g, content_update_payload(CREATOR_DID, g.cid, DOC_B, ts(offset)))


def test_future_guard_is_24h() -> None:
    genesis(at=format_timestamp(NOW_MS + FUTURE_GUARD_MS))
    with pytest.raises(FutureTimestampError):
        genesis(at=format_timestamp(NOW_MS + FUTURE_GUARD_MS + 1))


def test_previous_operation_cid_must_be_parent() -> None:
    g = genesis()
    with pytest.raises(ChainError, match="previousOperationCID"):
        extend(g, content_update_payload(CREATOR_DID, DOC_A, DOC_B, ts(1)))


def test_kid_did_must_match_payload_did() -> None:
    g = genesis()
    payload = content_update_payload(CREATOR_DID, g.cid, DOC_B, ts(1))
    with pytest.raises(ChainError, match="kid DID"):
        extend(g, payload, signer=K3, kid=kid_of(DELEGATE_DID, K3))


def test_unknown_signer_key_is_a_missing_dependency() -> None:
    g = genesis()
    payload = content_update_payload(CREATOR_DID, g.cid, DOC_B, ts(1))
    with pytest.raises(KeyNotFoundError) as info:
        extend(g, payload, signer=K3, kid=kid_of(CREATOR_DID, K3))
    assert info.value.did == CREATOR_DID


def test_signature_must_match_resolved_key() -> None:
    g = genesis()
    payload = content_update_payload(CREATOR_DID, g.cid, DOC_B, ts(1))
    with pytest.raises(SignatureError):
        extend(g, payload, signer=K3, kid=kid_of(CREATOR_DID, K2))


def test_tampered_vector_signature_is_rejected() -> None:
    head, payload, _ = vector("content-lifecycle")["chain"][0].split(".")
    with pytest.raises(SignatureError):
        verify_content_chain([f"{head}.{payload}.{b64url_encode(bytes(64))}"], RESOLVE, NOW_MS)


def test_first_operation_must_be_create_and_create_cannot_extend() -> None:
    with pytest.raises(ChainError, match="create"):
        verify_content_chain(vector("content-lifecycle")["chain"][1:], RESOLVE, NOW_MS)
    g = genesis()
    with pytest.raises(ChainError, match="create"):
        extend(g, content_create_payload(CREATOR_DID, DOC_B, ts(1)))


def test_wrong_typ_is_malformed() -> None:
    payload = content_create_payload(CREATOR_DID, DOC_A, ts())
    token = sign_operation("did:dfos:identity-op", payload, K2, kid_of(CREATOR_DID, K2)).token
    with pytest.raises(MalformedError, match="typ"):
        verify_content_genesis(decode_jws(token), RESOLVE, NOW_MS)


def test_state_record_round_trip() -> None:
    state = verify_content_chain(vector("content-delete")["chain"], RESOLVE, NOW_MS).state
    assert ContentState.from_record(state.to_record()) == state
