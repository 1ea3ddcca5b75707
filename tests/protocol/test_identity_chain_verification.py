"""Identity chains: genesis signed by one of its own controller keys (bare kid);
extensions signed by a controller key of the parent state (DID URL kid), linked
by previousOperationCID, strictly increasing createdAt, nothing after delete,
createdAt at most 24h ahead."""

from __future__ import annotations

import pytest

from relay.protocol import (
    FUTURE_GUARD_MS,
    TYP_IDENTITY,
    ChainError,
    CidMismatchError,
    Ed25519Keypair,
    FutureTimestampError,
    IdentityState,
    MalformedError,
    ProtocolError,
    SignatureError,
    VerifiedIdentityOp,
    b64url_encode,
    decode_jws,
    format_timestamp,
    identity_create_payload,
    identity_delete_payload,
    identity_update_payload,
    sign_jws,
    sign_operation,
    verify_identity_chain,
    verify_identity_extension,
    verify_identity_genesis,
)

from .conftest import CREATOR_DID, NOW_MS, ref_key, vector

K1, K2, K3 = ref_key(1), ref_key(2), ref_key(3)
T0 = NOW_MS - 3_600_000


def ts(offset_ms: int = 0) -> str:
    return format_timestamp(T0 + offset_ms)


def genesis(
    signer: Ed25519Keypair = K1,
    kid: str | None = None,
    controllers: tuple[Ed25519Keypair, ...] = (K1,),
    at: str | None = None,
) -> VerifiedIdentityOp:
    payload = identity_create_payload([K1, K3], [K1], controllers, at or ts())
    token = sign_operation(TYP_IDENTITY, payload, signer, kid or signer.key_id).token
    return verify_identity_genesis(decode_jws(token), NOW_MS)


def extend(
    parent: VerifiedIdentityOp,
    payload: dict[str, object],
    signer: Ed25519Keypair = K1,
    kid: str | None = None,
    now_ms: int = NOW_MS,
) -> VerifiedIdentityOp:
    kid = kid or f"{parent.did}#{signer.key_id}"
    token = sign_operation(TYP_IDENTITY, payload, signer, kid).token
    return verify_identity_extension(
        decode_jws(token),
        parent.did,
        parent.cid,
        parent.state,
        parent.operation.created_at_ms,
        now_ms,
    )


def rotate_to_k2(parent: VerifiedIdentityOp, at: str | None = None) -> dict[str, object]:
    return identity_update_payload(parent.cid, [K2], [K2], [K2], at or ts(60_000))


@pytest.mark.parametrize("name", ["identity-genesis", "identity-rotation", "identity-delete"])
def test_vector_chains_verify_to_expected_state(name: str) -> None:
    v = vector(name)
    result = verify_identity_chain(v["chain"], NOW_MS)
    assert result.did == v["expected"]["did"] == CREATOR_DID
    assert result.state.is_deleted is v["expected"]["isDeleted"]
    assert [k.to_json() for k in result.state.controller_keys] == v["expected"]["controllerKeys"]
    assert result.head_cid == decode_jws(v["chain"][-1]).header_cid
    assert len(result.operations) == len(v["chain"])


def test_rotation_vector_signer_is_old_controller() -> None:
    ops = verify_identity_chain(vector("identity-rotation")["chain"], NOW_MS).operations
    assert [op.signer_key_id for op in ops] == ["key_r9ev34fvc23z999veaaft8"] * 2
    assert ops[1].state.find_controller_key("key_ez9a874tckr3dv933d3ckd") is not None
    assert ops[1].state.find_controller_key("key_r9ev34fvc23z999veaaft8") is None


def test_delete_keeps_keys_and_seals_chain() -> None:
    ops = verify_identity_chain(vector("identity-delete")["chain"], NOW_MS).operations
    assert ops[1].state.is_deleted
    assert ops[1].state.controller_keys == ops[0].state.controller_keys


def test_update_replaces_every_key_set() -> None:
    head = extend(genesis(), rotate_to_k2(genesis()))
    assert {k.id for k in head.state.all_keys()} == {K2.key_id}
    assert head.state.find_key(K3.key_id) is None


def test_signed_chain_round_trip_through_verify_identity_chain() -> None:
    g = genesis()
    p1 = rotate_to_k2(g)
    t1 = sign_operation(TYP_IDENTITY, p1, K1, f"{g.did}#{K1.key_id}")
    p2 = identity_delete_payload(t1.cid, ts(120_000))
    t2 = sign_operation(TYP_IDENTITY, p2, K2, f"{g.did}#{K2.key_id}")
    g_token = sign_operation(
        TYP_IDENTITY, identity_create_payload([K1, K3], [K1], [K1], ts()), K1, K1.key_id
    ).token
    result = verify_identity_chain([g_token, t1.token, t2.token], NOW_MS)
    assert result.state.is_deleted and result.head_cid == t2.cid


# --- genesis rules -----------------------------------------------------------------------------


def test_genesis_signer_must_be_one_of_its_controller_keys() -> None:
    # K3 is an auth key of the genesis but not a controller key.
    with pytest.raises(ChainError, match="controller"):
        genesis(signer=K3)


def test_genesis_kid_naming_controller_but_signed_by_other_key() -> None:
    with pytest.raises(SignatureError):
        genesis(signer=K2, kid=K1.key_id)


def test_genesis_kid_must_be_bare() -> None:
    with pytest.raises(MalformedError, match="bare"):
        genesis(kid=f"{CREATOR_DID}#{K1.key_id}")


def test_genesis_must_be_create() -> None:
    token = vector("identity-rotation")["chain"][1]
    with pytest.raises(ChainError, match="create"):
        verify_identity_genesis(decode_jws(token), NOW_MS)


def test_genesis_future_guard_is_24h() -> None:
    genesis(at=format_timestamp(NOW_MS + FUTURE_GUARD_MS))
    with pytest.raises(FutureTimestampError, match="24h"):
        genesis(at=format_timestamp(NOW_MS + FUTURE_GUARD_MS + 1))


@pytest.mark.parametrize(
    ("header", "error"),
    [
        pytest.param({"typ": "did:dfos:content-op"}, MalformedError, id="wrong-typ"),
        pytest.param({"cid": None}, CidMismatchError, id="missing-cid"),
        pytest.param(
            {"cid": "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa"},
            CidMismatchError,
            id="wrong-cid",
        ),
        pytest.param({"kid": None}, MalformedError, id="missing-kid"),
    ],
)
def test_genesis_header_rules(header: dict[str, object], error: type[ProtocolError]) -> None:
    decoded = decode_jws(vector("identity-genesis")["chain"][0])
    new_header = {k: v for k, v in {**decoded.header, **header}.items() if v is not None}
    token = sign_jws(new_header, decoded.payload, K1)
    with pytest.raises(error):
        verify_identity_genesis(decode_jws(token), NOW_MS)


def test_tampered_vector_signature_is_rejected() -> None:
    head, payload, _ = vector("identity-genesis")["chain"][0].split(".")
    forged = f"{head}.{payload}.{b64url_encode(bytes(64))}"
    with pytest.raises(SignatureError):
        verify_identity_chain([forged], NOW_MS)


# --- extension rules ---------------------------------------------------------------------------


def test_no_operation_after_delete() -> None:
    g = genesis()
    deleted = extend(g, identity_delete_payload(g.cid, ts(60_000)))
    with pytest.raises(ChainError, match="deleted"):
        extend(deleted, identity_update_payload(deleted.cid, [K1], [K1], [K1], ts(120_000)))


def test_extension_signer_must_be_parent_controller() -> None:
    g = genesis()
    with pytest.raises(ChainError, match="controller"):
        extend(g, rotate_to_k2(g), signer=K3)  # K3 is only an auth key


def test_rotated_out_controller_can_no_longer_sign() -> None:
    g = genesis()
    rotated = extend(g, rotate_to_k2(g))
    with pytest.raises(ChainError, match="controller"):
        extend(rotated, identity_delete_payload(rotated.cid, ts(120_000)), signer=K1)
    assert extend(rotated, identity_delete_payload(rotated.cid, ts(120_000)), signer=K2)


@pytest.mark.parametrize("offset", [pytest.param(0, id="equal"), pytest.param(-1, id="earlier")])
def test_created_at_must_strictly_increase(offset: int) -> None:
    g = genesis()
    with pytest.raises(ChainError, match="later"):
        extend(g, rotate_to_k2(g, at=ts(offset)))


def test_extension_future_guard_is_24h() -> None:
    g = genesis()
    extend(g, rotate_to_k2(g, at=format_timestamp(NOW_MS + FUTURE_GUARD_MS)))
    with pytest.raises(FutureTimestampError):
        extend(g, rotate_to_k2(g, at=format_timestamp(NOW_MS + FUTURE_GUARD_MS + 1)))


def test_previous_operation_cid_must_be_parent() -> None:
    g = genesis()
    other = identity_update_payload(
        "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa", [K2], [K2], [K2], ts(1)
    )
    with pytest.raises(ChainError, match="previousOperationCID"):
        extend(g, other)


def test_kid_did_must_be_the_identity() -> None:
    g = genesis()
    with pytest.raises(ChainError, match="kid DID"):
        extend(g, rotate_to_k2(g), kid=f"did:dfos:nzkf838efr424433rn2rzk#{K1.key_id}")


def test_extension_kid_must_be_a_did_url() -> None:
    g = genesis()
    with pytest.raises(MalformedError, match="DID URL"):
        extend(g, rotate_to_k2(g), kid=K1.key_id)


def test_create_cannot_extend() -> None:
    g = genesis()
    payload = identity_create_payload([K1], [K1], [K1], ts(1))
    with pytest.raises(ChainError, match="create"):
        extend(g, payload)


def test_update_without_controller_keys_is_malformed() -> None:
    g = genesis()
    with pytest.raises(MalformedError, match="controller"):
        extend(g, identity_update_payload(g.cid, [K1], [K1], [], ts(1)))


def test_empty_chain_is_malformed() -> None:
    with pytest.raises(MalformedError):
        verify_identity_chain([], NOW_MS)


def test_state_from_trusted_record_verifies_extension() -> None:
    g = genesis()
    restored = IdentityState.from_record(g.state.to_record())
    assert restored == g.state
    token = sign_operation(TYP_IDENTITY, rotate_to_k2(g), K1, f"{g.did}#{K1.key_id}").token
    verified = verify_identity_extension(
        decode_jws(token), g.did, g.cid, restored, g.operation.created_at_ms, NOW_MS
    )
    assert verified.state.controller_keys[0].id == K2.key_id
