"""JWS compact serialization: three base64url segments, JSON object header and
payload, alg EdDSA, 64-byte Ed25519 signature over ``header.payload``. Signing
is deterministic, so re-signing every vector payload reproduces its token."""

from __future__ import annotations

import re

import pytest

from relay.protocol import (
    DecodedJws,
    Ed25519Keypair,
    MalformedError,
    SignatureError,
    b64url_encode,
    decode_jws,
    sign_jws,
    sign_operation,
    split_kid,
    verify_jws,
    verify_signature,
)

from .conftest import SPECS_DIR, keys_by_id, ref_key, vector


def _operation_tokens() -> list[pytest.ParameterSet]:
    params = []
    for name in (
        "identity-genesis",
        "identity-rotation",
        "identity-delete",
        "content-lifecycle",
        "content-delete",
        "content-delegated",
    ):
        params += [pytest.param(t, id=f"{name}-{i}") for i, t in enumerate(vector(name)["chain"])]
    params.append(pytest.param(vector("beacon")["controllerJws"], id="beacon-controller"))
    params.append(pytest.param(vector("beacon")["witnessJws"], id="beacon-witness"))
    return params


def _all_vector_tokens() -> list[pytest.ParameterSet]:
    params = _operation_tokens()
    params.append(pytest.param(vector("content-delegated")["authorization"], id="delegated-vc"))
    params.append(pytest.param(vector("credential-read")["credential"], id="credential-read"))
    for kind in ("broadCredential", "narrowCredential"):
        params.append(pytest.param(vector("credential-write")[kind], id=f"credential-write-{kind}"))
    return params


def _signer(decoded: DecodedJws) -> Ed25519Keypair:
    assert decoded.kid is not None
    return keys_by_id()[split_kid(decoded.kid)[1]]


@pytest.mark.parametrize("token", _all_vector_tokens())
def test_resigning_vector_payload_reproduces_token(token: str) -> None:
    decoded = decode_jws(token)
    assert sign_jws(decoded.header, decoded.payload, _signer(decoded)) == token


@pytest.mark.parametrize("token", _all_vector_tokens())
def test_vector_signature_verifies_with_reference_key(token: str) -> None:
    decoded = decode_jws(token)
    verify_jws(decoded, _signer(decoded).public_key)
    assert decoded.signing_input == token.rsplit(".", 1)[0].encode()


@pytest.mark.parametrize("token", _operation_tokens())
def test_sign_operation_header_order_reproduces_operation_tokens(token: str) -> None:
    decoded = decode_jws(token)
    assert decoded.typ is not None and decoded.kid is not None
    signed = sign_operation(decoded.typ, decoded.payload, _signer(decoded), decoded.kid)
    assert signed.token == token
    assert signed.cid == decoded.header_cid


@pytest.mark.parametrize(
    ("name", "index", "signature_hex"),
    [
        pytest.param(
            "identity-genesis",
            0,
            "103af20cad6ebed8b1fb5edc1ee9fdb7a31a705231dab326305d502f37c3e531"
            "654ac3af31cb9ef7ba428069f709778b545b55c60a42a21d241925e2a0a2b303",
            id="genesis",
        ),
        pytest.param(
            "identity-rotation",
            1,
            "31272ea0196038ade3e505fdb45730d68bb4a382e0273886244b19e69bea881a"
            "f549a800c80bf987ec1a8d086d83c20fedd2e533453895e5b6891adaf78e5c0e",
            id="rotation",
        ),
        pytest.param(
            "content-lifecycle",
            0,
            "46feaf973e4c7ebc2a0d4ad25481ace197de05b91051205c5e1c7067a85fb9d4"
            "abe4cc61625d3c853a8b0ce0345b534c8cdd07b34216f635d3c0bc0fd5d30306",
            id="content-create",
        ),
    ],
)
def test_signature_bytes_match_the_spec(name: str, index: int, signature_hex: str) -> None:
    assert decode_jws(vector(name)["chain"][index]).signature.hex() == signature_hex


def test_decoded_properties() -> None:
    decoded = decode_jws(vector("identity-genesis")["chain"][0])
    assert decoded.typ == "did:dfos:identity-op"
    assert decoded.kid == "key_r9ev34fvc23z999veaaft8"
    assert decoded.header_cid == "bafyreibanjpgcqffcfhr4sptzjfthh5szohhbo5tjfulemkw7uhden5uqy"
    assert decoded.payload["version"] == 1


def test_tampered_signature_is_rejected() -> None:
    token = vector("identity-genesis")["chain"][0]
    head, payload, _ = token.split(".")
    flipped = bytearray(decode_jws(token).signature)
    flipped[0] ^= 1
    decoded = decode_jws(f"{head}.{payload}.{b64url_encode(bytes(flipped))}")
    with pytest.raises(SignatureError):
        verify_jws(decoded, ref_key(1).public_key)


def test_signature_by_other_key_is_rejected() -> None:
    decoded = decode_jws(vector("identity-genesis")["chain"][0])
    with pytest.raises(SignatureError):
        verify_jws(decoded, ref_key(2).public_key)


def test_verify_signature_never_raises() -> None:
    assert not verify_signature(b"short", b"msg", bytes(64))
    assert not verify_signature(bytes(32), b"msg", b"short")
    assert not verify_signature(None, b"msg", bytes(64))  # type: ignore[arg-type]


def _seg(text: str) -> str:
    return b64url_encode(text.encode())


GOOD_HEADER = _seg('{"alg":"EdDSA"}')
GOOD_PAYLOAD = _seg("{}")
GOOD_SIG = b64url_encode(bytes(64))


def _token(header: str = '{"alg":"EdDSA"}', payload: str = "{}", sig: bytes = bytes(64)) -> str:
    return f"{_seg(header)}.{_seg(payload)}.{b64url_encode(sig)}"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        pytest.param(f"{GOOD_HEADER}.{GOOD_PAYLOAD}", "three segments", id="two-segments"),
        pytest.param(_token() + ".x", "three segments", id="four-segments"),
        pytest.param(_token(header='{"alg":"none"}'), "EdDSA", id="alg-none"),
        pytest.param(_token(header="{}"), "EdDSA", id="alg-missing"),
        pytest.param(_token(header="[1]"), "object", id="header-array"),
        pytest.param(_token(payload="[]"), "object", id="payload-array"),
        pytest.param(_token(payload="{"), "JSON", id="payload-bad-json"),
        pytest.param(_token(payload='{"a":NaN}'), "NaN", id="nan-literal"),
        pytest.param(_token(payload='{"a":Infinity}'), "Infinity", id="infinity-literal"),
        pytest.param(
            f"{GOOD_HEADER}.{b64url_encode(b'{}' + bytes([0xFF]))}.{GOOD_SIG}",
            "JSON",
            id="bad-utf8",
        ),
        pytest.param(_token(sig=bytes(63)), "64 bytes", id="short-signature"),
        pytest.param(f"{GOOD_HEADER}=.{GOOD_PAYLOAD}.{GOOD_SIG}", "base64url", id="padded"),
        pytest.param(_token(payload='{"a":"' + "x" * 70000 + '"}'), "64 KiB", id="over-64-kib"),
    ],
)
def test_malformed_tokens_are_rejected(token: str, message: str) -> None:
    with pytest.raises(MalformedError, match=message):
        decode_jws(token)


def test_json_is_serialised_like_json_stringify() -> None:
    token = sign_jws({"alg": "EdDSA"}, {"b": "é\n", "a": [1, None]}, ref_key(1))
    payload_segment = token.split(".")[1]
    assert payload_segment == b64url_encode('{"b":"é\\n","a":[1,null]}'.encode())


def test_printed_genesis_token_in_protocol_md_is_corrupt_and_rejected() -> None:
    # The PROTOCOL.md "JWS Token" for the genesis has a typo in controllerKeys[0].id
    # (key_r9ev34fvc23z991veaaft8) while keeping the real signature: it must not verify.
    spec = SPECS_DIR / "PROTOCOL.md"
    if not spec.exists():
        pytest.skip("specs not available")
    tokens = re.findall(
        r"\n(eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+)\n", spec.read_text()
    )
    printed = decode_jws(tokens[0])
    assert printed.header_cid == "bafyreibanjpgcqffcfhr4sptzjfthh5szohhbo5tjfulemkw7uhden5uqy"
    assert tokens[0] != vector("identity-genesis")["chain"][0]
    with pytest.raises(SignatureError):
        verify_jws(printed, ref_key(1).public_key)
