"""Prechecking (CID derivation and signature check ahead of verification) only
saves work: the verifiers still compare the derived CID with the header and
only accept a prechecked key when the chain rules offer that same key."""

from __future__ import annotations

import dataclasses

import pytest

from relay.protocol import (
    CidMismatchError,
    SignatureError,
    b64url_encode,
    check_cid,
    decode_jws,
    precheck,
    reference_keypair,
    verify_identity_genesis,
)
from relay.protocol.envelope import verify_with_resolver

from .conftest import NOW_MS, vector

GENESIS = vector("identity-genesis")["chain"][0]
KEY = reference_keypair(1)


def test_precheck_derives_the_payload_cid() -> None:
    checked = precheck(decode_jws(GENESIS), [])
    assert checked.payload_cid is not None
    assert checked.payload_cid[0] == decode_jws(GENESIS).header_cid
    assert check_cid(checked) == check_cid(decode_jws(GENESIS))


def test_precheck_records_the_key_that_verifies() -> None:
    other = reference_keypair(2).public_key
    checked = precheck(decode_jws(GENESIS), [other, KEY.public_key])
    assert checked.verified_key == KEY.public_key
    assert (
        verify_identity_genesis(checked, NOW_MS).did
        == verify_identity_genesis(decode_jws(GENESIS), NOW_MS).did
    )


def test_no_key_recorded_when_no_candidate_verifies() -> None:
    checked = precheck(decode_jws(GENESIS), [reference_keypair(2).public_key])
    assert checked.verified_key is None
    verify_identity_genesis(checked, NOW_MS)  # the verifier checks it itself


def test_tampered_signature_is_never_recorded() -> None:
    head, payload, _ = GENESIS.split(".")
    flipped = bytearray(decode_jws(GENESIS).signature)
    flipped[0] ^= 1
    tampered = decode_jws(f"{head}.{payload}.{b64url_encode(bytes(flipped))}")
    checked = precheck(tampered, [KEY.public_key])
    assert checked.verified_key is None
    with pytest.raises(SignatureError):
        verify_identity_genesis(checked, NOW_MS)


def test_a_prechecked_key_counts_only_if_the_resolver_offers_it() -> None:
    checked = precheck(decode_jws(GENESIS), [KEY.public_key])
    assert checked.verified_key == KEY.public_key
    with pytest.raises(SignatureError):
        verify_with_resolver(checked, lambda kid: [reference_keypair(2).public_key], "did:x")
    verify_with_resolver(checked, lambda kid: [KEY.public_key], "did:x")


def test_a_header_cid_that_lies_is_still_caught() -> None:
    decoded = decode_jws(GENESIS)
    lying = dataclasses.replace(decoded, header={**decoded.header, "cid": "bafyfake"})
    with pytest.raises(CidMismatchError):
        check_cid(precheck(lying, [KEY.public_key]))
