"""Standalone signed statements: beacons (5-minute future guard), artifacts
(<= 16384 CBOR bytes, content.$schema, 24h guard) and countersignatures; each
needs kid DID = payload did, a matching cid header and a valid signature."""

from __future__ import annotations

import pytest

from relay.protocol import (
    ARTIFACT_MAX_CBOR_BYTES,
    BEACON_FUTURE_GUARD_MS,
    FUTURE_GUARD_MS,
    TYP_ARTIFACT,
    TYP_BEACON,
    TYP_COUNTERSIGN,
    ChainError,
    CidMismatchError,
    Ed25519Keypair,
    FutureTimestampError,
    KeyNotFoundError,
    MalformedError,
    SignatureError,
    artifact_payload,
    beacon_payload,
    countersign_payload,
    decode_jws,
    encode_canonical,
    format_timestamp,
    merkle_root,
    sign_jws,
    sign_operation,
    verify_artifact,
    verify_beacon,
    verify_countersign,
)

from .conftest import CREATOR_DID, DELEGATE_DID, NOW_MS, ref_key, reference_resolver, vector

K1, K2, K3 = ref_key(1), ref_key(2), ref_key(3)
RESOLVE = reference_resolver()
ROOT = "7e80d4780f454e0fca0b090d8c646f572b49354f54154531606105aad2fda28e"
PROFILE = "https://schemas.dfos.com/profile/v1"


def _kid(did: str, key: Ed25519Keypair) -> str:
    return f"{did}#{key.key_id}"


@pytest.mark.parametrize("field", ["controllerJws", "witnessJws"])
def test_beacon_vector_signatures_verify(field: str) -> None:
    v = vector("beacon")
    verified = verify_beacon(decode_jws(v[field]), RESOLVE, NOW_MS)
    assert verified.cid == v["expected"]["beaconCID"]
    assert verified.payload.did == v["expected"]["did"]
    assert verified.payload.merkle_root == v["expected"]["merkleRoot"]
    assert verified.payload.created_at == v["expected"]["createdAt"]


def test_beacon_vector_root_is_the_merkle_tree_vector_root() -> None:
    assert (
        merkle_root(vector("merkle-tree")["contentIds"])
        == vector("beacon")["expected"]["merkleRoot"]
    )


def _beacon(offset_ms: int, signer: Ed25519Keypair = K1, kid: str | None = None) -> str:
    payload = beacon_payload(CREATOR_DID, ROOT, format_timestamp(NOW_MS + offset_ms))
    return sign_operation(TYP_BEACON, payload, signer, kid or _kid(CREATOR_DID, signer)).token


def test_beacon_future_guard_is_5_minutes() -> None:
    verify_beacon(decode_jws(_beacon(BEACON_FUTURE_GUARD_MS)), RESOLVE, NOW_MS)
    with pytest.raises(FutureTimestampError, match="5min"):
        verify_beacon(decode_jws(_beacon(BEACON_FUTURE_GUARD_MS + 1)), RESOLVE, NOW_MS)


def test_beacon_kid_did_must_match_payload_did() -> None:
    with pytest.raises(ChainError, match="kid DID"):
        verify_beacon(decode_jws(_beacon(0, K3, _kid(DELEGATE_DID, K3))), RESOLVE, NOW_MS)


def test_beacon_signed_by_unknown_key_is_missing_dependency() -> None:
    with pytest.raises(KeyNotFoundError):
        verify_beacon(decode_jws(_beacon(0, K3)), RESOLVE, NOW_MS)


def test_beacon_wrong_cid_header() -> None:
    decoded = decode_jws(vector("beacon")["controllerJws"])
    header = {
        **decoded.header,
        "cid": "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa",
    }
    with pytest.raises(CidMismatchError):
        verify_beacon(decode_jws(sign_jws(header, decoded.payload, K1)), RESOLVE, NOW_MS)


def test_beacon_tampered_payload_breaks_signature() -> None:
    decoded = decode_jws(vector("beacon")["controllerJws"])
    # Re-sign under key 2 while the kid still names key 1.
    forged = sign_jws(decoded.header, decoded.payload, K2)
    with pytest.raises(SignatureError):
        verify_beacon(decode_jws(forged), RESOLVE, NOW_MS)


def test_beacon_wrong_typ() -> None:
    decoded = decode_jws(vector("beacon")["controllerJws"])
    forged = sign_jws({**decoded.header, "typ": TYP_ARTIFACT}, decoded.payload, K1)
    with pytest.raises(MalformedError, match="typ"):
        verify_beacon(decode_jws(forged), RESOLVE, NOW_MS)


# --- artifacts ---------------------------------------------------------------------------------


def _artifact(content: dict[str, object], offset_ms: int = 0) -> str:
    payload = artifact_payload(CREATOR_DID, content, format_timestamp(NOW_MS + offset_ms))
    return sign_operation(TYP_ARTIFACT, payload, K2, _kid(CREATOR_DID, K2)).token


def _content_of_cbor_size(size: int) -> dict[str, object]:
    content: dict[str, object] = {"$schema": PROFILE, "name": ""}
    base = len(encode_canonical(artifact_payload(CREATOR_DID, content, format_timestamp(NOW_MS))))
    # A text string head grows from 2 to 3 bytes at 256 chars; sizes here are far above it.
    content["name"] = "x" * (size - base - 2)
    return content


def test_artifact_verifies() -> None:
    verified = verify_artifact(
        decode_jws(_artifact({"$schema": PROFILE, "name": "Relay"})), RESOLVE, NOW_MS
    )
    assert verified.payload.schema == PROFILE and verified.payload.content["name"] == "Relay"
    assert verified.cbor_size == len(
        encode_canonical(decode_jws(_artifact({"$schema": PROFILE, "name": "Relay"})).payload)
    )


def test_artifact_size_limit_is_16384_cbor_bytes() -> None:
    at_limit = verify_artifact(
        decode_jws(_artifact(_content_of_cbor_size(ARTIFACT_MAX_CBOR_BYTES))), RESOLVE, NOW_MS
    )
    assert at_limit.cbor_size == ARTIFACT_MAX_CBOR_BYTES
    with pytest.raises(MalformedError, match="16384"):
        verify_artifact(
            decode_jws(_artifact(_content_of_cbor_size(ARTIFACT_MAX_CBOR_BYTES + 1))),
            RESOLVE,
            NOW_MS,
        )


def test_artifact_requires_schema() -> None:
    with pytest.raises(MalformedError, match="schema"):
        verify_artifact(decode_jws(_artifact({"name": "x"})), RESOLVE, NOW_MS)


def test_artifact_future_guard_is_24h() -> None:
    verify_artifact(decode_jws(_artifact({"$schema": PROFILE}, FUTURE_GUARD_MS)), RESOLVE, NOW_MS)
    with pytest.raises(FutureTimestampError):
        verify_artifact(
            decode_jws(_artifact({"$schema": PROFILE}, FUTURE_GUARD_MS + 1)), RESOLVE, NOW_MS
        )


# --- countersignatures -------------------------------------------------------------------------


def _countersign(target: str, did: str = DELEGATE_DID, signer: Ed25519Keypair = K3) -> str:
    payload = countersign_payload(did, target, format_timestamp(NOW_MS))
    return sign_operation(TYP_COUNTERSIGN, payload, signer, _kid(did, signer)).token


def test_witness_countersigns_the_beacon_by_cid() -> None:
    beacon_cid = vector("beacon")["expected"]["beaconCID"]
    verified = verify_countersign(decode_jws(_countersign(beacon_cid)), RESOLVE, NOW_MS)
    assert verified.payload.target_cid == beacon_cid
    assert verified.cid != beacon_cid


def test_countersign_kid_must_be_the_witness() -> None:
    payload = countersign_payload(
        DELEGATE_DID, vector("beacon")["expected"]["beaconCID"], format_timestamp(NOW_MS)
    )
    token = sign_operation(TYP_COUNTERSIGN, payload, K1, _kid(CREATOR_DID, K1)).token
    with pytest.raises(ChainError, match="kid DID"):
        verify_countersign(decode_jws(token), RESOLVE, NOW_MS)


def test_countersign_signature_and_typ() -> None:
    target = vector("beacon")["expected"]["beaconCID"]
    decoded = decode_jws(_countersign(target))
    with pytest.raises(SignatureError):
        verify_countersign(
            decode_jws(sign_jws(decoded.header, decoded.payload, K1)), RESOLVE, NOW_MS
        )
    with pytest.raises(MalformedError, match="typ"):
        verify_countersign(decode_jws(vector("beacon")["controllerJws"]), RESOLVE, NOW_MS)
