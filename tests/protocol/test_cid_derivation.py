"""CIDv1 = base32lower(0x01 0x71 0x12 0x20 || sha256(canonical dag-cbor)), derived
from the parsed JWS payload and equal to every vector's header ``cid``."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from multiformats import CID

from relay.protocol import (
    CidMismatchError,
    MalformedError,
    base32_encode,
    check_cid,
    cid_from_cbor,
    cid_of,
    cid_to_bytes,
    decode_jws,
    encode_canonical,
    is_cid,
    sign_jws,
)

from .conftest import ref_key, vector

GENESIS_CID = "bafyreibanjpgcqffcfhr4sptzjfthh5szohhbo5tjfulemkw7uhden5uqy"


def _vector_tokens() -> list[pytest.ParameterSet]:
    params = []
    for name in ("identity-genesis", "identity-rotation", "identity-delete"):
        params += [pytest.param(t, id=f"{name}-{i}") for i, t in enumerate(vector(name)["chain"])]
    for name in ("content-lifecycle", "content-delete", "content-delegated"):
        params += [pytest.param(t, id=f"{name}-{i}") for i, t in enumerate(vector(name)["chain"])]
    beacon = vector("beacon")
    params += [pytest.param(beacon["controllerJws"], id="beacon-controller")]
    params += [pytest.param(beacon["witnessJws"], id="beacon-witness")]
    return params


@pytest.mark.parametrize("token", _vector_tokens())
def test_header_cid_equals_derived_cid(token: str) -> None:
    decoded = decode_jws(token)
    cid, cbor = check_cid(decoded)
    assert cid == decoded.header_cid
    assert cid == cid_from_cbor(cbor) == cid_of(decoded.payload)
    assert str(CID("base32", 1, "dag-cbor", ("sha2-256", hashlib.sha256(cbor).digest()))) == cid


def test_genesis_cid_bytes_match_the_worked_example() -> None:
    raw = cid_to_bytes(GENESIS_CID)
    assert raw.hex() == "01711220206a5e6140a5114f1e49f3ca4b339fb2cb8e70bbb34968b23156fd0e3237b486"


@pytest.mark.parametrize(
    ("name", "index", "expected"),
    [
        pytest.param(
            "content-lifecycle",
            0,
            "bafyreihzwuoupfg3dxip6xmgzmxsywyii2jeoxxzbgx3zxm2in7knoi3g4",
            id="hello-world",
        ),
        pytest.param(
            "content-lifecycle",
            1,
            "bafyreidh7e36cvwy3uw5ypitcqk7uoktbkkkj7e6hxhky4o75rxn7kxilu",
            id="hello-world-edited",
        ),
        pytest.param(
            "content-delegated",
            0,
            "bafyreign7gfuu54wo2geg3tf5tepeplblktahjfzqjpujizc7a2boeycca",
            id="original-post",
        ),
        pytest.param(
            "content-delegated",
            1,
            "bafyreifniynd6hev646uoajac3egak7p2qfhrhho4mfmppa3rtcjpetgde",
            id="delegated-edit",
        ),
    ],
)
def test_document_cids_of_vector_documents(name: str, index: int, expected: str) -> None:
    assert cid_of(vector(name)["documents"][index]["content"]) == expected


@pytest.mark.parametrize(
    ("header_cid", "message"),
    [
        pytest.param(None, "no cid", id="missing"),
        pytest.param(
            "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa",
            "does not match",
            id="other-cid",
        ),
        pytest.param(GENESIS_CID.upper(), "does not match", id="wrong-case"),
    ],
)
def test_header_cid_missing_or_different_is_rejected(header_cid: str | None, message: str) -> None:
    payload = decode_jws(vector("identity-genesis")["chain"][0]).payload
    header: dict[str, object] = {"alg": "EdDSA", "typ": "did:dfos:identity-op", "kid": "k"}
    if header_cid is not None:
        header["cid"] = header_cid
    decoded = decode_jws(sign_jws(header, payload, ref_key(1)))
    with pytest.raises(CidMismatchError, match=message):
        check_cid(decoded)


def test_cid_is_derived_from_the_payload_not_the_json_text() -> None:
    # Same logical payload, different JSON spelling (key order, 1.0): same CID.
    payload = decode_jws(vector("identity-genesis")["chain"][0]).payload
    respelled = dict(reversed(list(payload.items())))
    respelled["version"] = 1.0
    assert cid_of(respelled) == GENESIS_CID
    assert encode_canonical(respelled) == encode_canonical(payload)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("B" + GENESIS_CID[1:], id="uppercase-multibase"),
        pytest.param("z" + GENESIS_CID[1:], id="other-multibase"),
        pytest.param(GENESIS_CID[:-1], id="truncated"),
        pytest.param("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", id="cidv0"),
        pytest.param("bafkreibanjpgcqffcfhr4sptzjfthh5szohhbo5tjfulemkw7uhden5uqy", id="raw-codec"),
    ],
)
def test_cid_to_bytes_rejects_other_shapes(text: str) -> None:
    assert not is_cid(text)


def test_is_cid_accepts_vector_cids() -> None:
    assert is_cid(GENESIS_CID)
    assert not is_cid(None)


def _decodes(text: str) -> bool:
    try:
        cid_to_bytes(text)
    except MalformedError:
        return False
    return True


@given(
    st.binary(min_size=32, max_size=32),
    st.integers(min_value=0, max_value=58),
    st.sampled_from("abcdefghijklmnopqrstuvwxyz234567ABZ01=\n"),
)
def test_is_cid_agrees_with_decoding(digest: bytes, at: int, char: str) -> None:
    """``is_cid`` (a regex, on every token) accepts exactly what decodes."""
    cid = "b" + base32_encode(b"\x01\x71\x12\x20" + digest)
    assert is_cid(cid) and _decodes(cid)
    for text in (cid[:at] + char + cid[at + 1 :], cid[:at] + char + cid[at:], cid[:at]):
        assert is_cid(text) == _decodes(text), text
