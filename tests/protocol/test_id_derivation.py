"""Ids are alphabet[b % 19] over the first 22 bytes of SHA-256: DIDs and content ids
from genesis CID bytes, key ids from public keys; kids split into (DID, key id)."""

from __future__ import annotations

import hashlib

import pytest

from relay.protocol import (
    ID_ALPHABET,
    ID_LENGTH,
    MalformedError,
    chain_id_from_genesis_cid,
    cid_to_bytes,
    content_id_from_genesis_cid,
    decode_jws,
    did_from_genesis_cid,
    encode_id,
    is_content_id,
    is_dfos_did,
    key_id_for_public_key,
    split_kid,
)

from .conftest import CREATOR_DID, DELEGATE_DID, ref_key, vector

GENESIS_CID = "bafyreibanjpgcqffcfhr4sptzjfthh5szohhbo5tjfulemkw7uhden5uqy"


def test_alphabet_and_length() -> None:
    assert ID_ALPHABET == "2346789acdefhknrtvz"
    assert len(ID_ALPHABET) == 19 and ID_LENGTH == 22


def test_did_derivation_worked_example() -> None:
    raw = cid_to_bytes(GENESIS_CID)
    digest = hashlib.sha256(raw).hexdigest()
    assert digest == "4360cfbcbbb3f1614c8e02dbfe8d55935e1195cd2129820ab8aef94bde12ea8a"
    assert encode_id(raw) == "e3vvtck42d4eacdnzvtrn6"
    assert chain_id_from_genesis_cid(GENESIS_CID) == "e3vvtck42d4eacdnzvtrn6"
    assert did_from_genesis_cid(GENESIS_CID) == CREATOR_DID


def test_encode_id_maps_each_byte_mod_19() -> None:
    data = b"any input"
    digest = hashlib.sha256(data).digest()[:22]
    assert encode_id(data) == "".join(ID_ALPHABET[b % 19] for b in digest)


@pytest.mark.parametrize("name", ["content-lifecycle", "content-delete", "content-delegated"])
def test_content_id_from_genesis_cid(name: str) -> None:
    genesis = decode_jws(vector(name)["chain"][0])
    assert genesis.header_cid is not None
    assert content_id_from_genesis_cid(genesis.header_cid) == vector(name)["expected"]["contentId"]


@pytest.mark.parametrize(
    ("n", "key_id"),
    [
        pytest.param(1, "key_r9ev34fvc23z999veaaft8", id="key-1"),
        pytest.param(2, "key_ez9a874tckr3dv933d3ckd", id="key-2"),
        pytest.param(3, "key_a8r27434aar76ae72c877f", id="key-3-delegate"),
    ],
)
def test_key_ids_of_reference_keys(n: int, key_id: str) -> None:
    assert key_id_for_public_key(ref_key(n).public_key) == key_id
    assert ref_key(n).key_id == key_id


@pytest.mark.parametrize(
    ("kid", "expected"),
    [
        pytest.param("key_r9ev34fvc23z999veaaft8", (None, "key_r9ev34fvc23z999veaaft8"), id="bare"),
        pytest.param(
            f"{CREATOR_DID}#key_r9ev34fvc23z999veaaft8",
            (CREATOR_DID, "key_r9ev34fvc23z999veaaft8"),
            id="did-url",
        ),
        pytest.param(f"{DELEGATE_DID}#anything", (DELEGATE_DID, "anything"), id="free-form-key-id"),
    ],
)
def test_split_kid(kid: str, expected: tuple[str | None, str]) -> None:
    assert split_kid(kid) == expected


@pytest.mark.parametrize(
    "kid",
    [
        pytest.param("", id="empty"),
        pytest.param("did#", id="empty-key-id"),
        pytest.param(f"{CREATOR_DID}#", id="dfos-did-empty-key-id"),
        pytest.param("#key_x", id="empty-did"),
        pytest.param("did:web:example.com#key", id="not-dfos"),
        pytest.param("did:dfos:short#key", id="short-id"),
        pytest.param(f"{CREATOR_DID}#a#b", id="two-hashes"),
    ],
)
def test_split_kid_rejects_malformed_did_urls(kid: str) -> None:
    with pytest.raises(MalformedError):
        split_kid(kid)


@pytest.mark.parametrize(
    ("value", "did", "content_id"),
    [
        pytest.param(CREATOR_DID, True, False, id="did"),
        pytest.param("e3vvtck42d4eacdnzvtrn6", False, True, id="content-id"),
        pytest.param("did:dfos:e3vvtck42d4eacdnzvtrn", False, False, id="21-chars"),
        pytest.param("did:dfos:e3vvtck42d4eacdnzvtrn61", False, False, id="23-chars"),
        pytest.param("did:dfos:e3vvtck42d4eacdnzvtrn1", False, False, id="char-outside-alphabet"),
        pytest.param("E3VVTCK42D4EACDNZVTRN6", False, False, id="uppercase"),
        pytest.param(None, False, False, id="none"),
    ],
)
def test_did_and_content_id_recognisers(value: object, did: bool, content_id: bool) -> None:
    assert is_dfos_did(value) is did
    assert is_content_id(value) is content_id
