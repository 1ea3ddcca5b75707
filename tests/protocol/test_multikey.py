"""W3C Multikey: 'z' + base58btc(0xed 0x01 || 32-byte Ed25519 key), reproduced for
reference keys 1-3 (PROTOCOL.md "Deterministic Reference Artifacts")."""

from __future__ import annotations

import pytest

from relay.protocol import (
    MalformedError,
    base58btc_encode,
    decode_multikey,
    encode_multikey,
)

from .conftest import ref_key, vector

REFERENCE_KEYS = [
    pytest.param(
        1,
        "132d4bebdb6e62359afb930fe15d756a92ad96e6b0d47619988f5a1a55272aac",
        "ba421e272fad4f941c221e47f87d9253bdc04f7d4ad2625ae667ab9f0688ce32",
        "z6MkrzLMNwoJSV4P3YccWcbtk8vd9LtgMKnLeaDLUqLuASjb",
        id="key-1-genesis-controller",
    ),
    pytest.param(
        2,
        "384f5626906db84f6a773ec46475ff2d4458e92dd4dd13fe03dbb7510f4ca2a8",
        "0f350f994f94d675f04a325bd316ebedd740ca206eaaf609bdb641b5faa0f78c",
        "z6MkfUd65JrAhfdgFuMCccU9ThQvjB2fJAMUHkuuajF992gK",
        id="key-2-rotated-controller",
    ),
    pytest.param(
        3,
        None,
        None,
        "z6MkvsvmSh2dGnu2qw1Tnw7M5fz98ycfuYGxqnpfgmPkLv7o",
        id="key-3-delegate",
    ),
]


@pytest.mark.parametrize(("n", "seed_hex", "public_hex", "multikey"), REFERENCE_KEYS)
def test_reference_keys(
    n: int, seed_hex: str | None, public_hex: str | None, multikey: str
) -> None:
    key = ref_key(n)
    if seed_hex is not None:
        assert key.seed.hex() == seed_hex
    if public_hex is not None:
        assert key.public_key.hex() == public_hex
    assert key.multikey == multikey == encode_multikey(key.public_key)
    assert decode_multikey(multikey) == key.public_key


@pytest.mark.parametrize(
    ("name", "field", "n"),
    [
        pytest.param("content-delegated", "creatorPublicKey", 1, id="delegated-creator"),
        pytest.param("content-delegated", "delegatePublicKey", 3, id="delegated-delegate"),
        pytest.param("credential-write", "subjectPublicKey", 3, id="write-subject"),
        pytest.param("beacon", "witnessPublicKey", 2, id="beacon-witness"),
        pytest.param("content-lifecycle", "signerPublicKey", 2, id="lifecycle-signer"),
    ],
)
def test_vector_public_keys_are_reference_keys(name: str, field: str, n: int) -> None:
    assert decode_multikey(vector(name)[field]) == ref_key(n).public_key


def test_prefix_is_the_varint_ed01_not_big_endian() -> None:
    pub = ref_key(1).public_key
    assert encode_multikey(pub) == "z" + base58btc_encode(b"\xed\x01" + pub)
    assert encode_multikey(pub).startswith("z6Mk")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("6MkrzLMNwoJSV4P3YccWcbtk8vd9LtgMKnLeaDLUqLuASjb", id="no-multibase-prefix"),
        pytest.param("m" + "A" * 40, id="base64-multibase"),
        pytest.param("z" + base58btc_encode(b"\x00\xed" + bytes(32)), id="big-endian-prefix"),
        pytest.param("z" + base58btc_encode(b"\xec\x01" + bytes(32)), id="x25519-prefix"),
        pytest.param("z" + base58btc_encode(b"\xed\x01" + bytes(31)), id="31-byte-key"),
        pytest.param("z" + base58btc_encode(b"\xed\x01" + bytes(33)), id="33-byte-key"),
        pytest.param("z6Mk0OIl", id="invalid-base58"),
        pytest.param("z" + "2" * 200, id="over-128-chars"),
    ],
)
def test_decode_rejects_anything_but_ed25519_multikeys(text: str) -> None:
    with pytest.raises(MalformedError):
        decode_multikey(text)


def test_encode_requires_32_bytes() -> None:
    with pytest.raises(ValueError):
        encode_multikey(bytes(31))
