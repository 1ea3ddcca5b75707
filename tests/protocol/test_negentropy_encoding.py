"""Negentropy V1 encodings, worked by hand from the V1 document: varints,
bounds (delta timestamps, id prefixes, infinity), fingerprints, and the
messages of the simplest exchanges."""

from __future__ import annotations

import hashlib

import pytest

from relay.protocol.negentropy import (
    INFINITY,
    Bound,
    Negentropy,
    NegentropyError,
    UnsupportedVersion,
    VectorStorage,
    cid_from_id,
    decode_varint,
    encode_varint,
    fingerprint_of,
    id_from_cid,
    id_from_logged_cid,
)
from relay.protocol.negentropy.reconciler import _minimal_bound
from relay.protocol.negentropy.wire import BoundReader, BoundWriter, Reader


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8100"), (300, "822c"), (16384, "818000"),
     (2**64 - 1, "81ffffffffffffffff7f")],
)  # fmt: skip
def test_varints_are_base128_most_significant_digit_first(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


@pytest.mark.parametrize(
    ("encoded", "why"),
    [("", "truncated"), ("81", "truncated"), ("8001", "leading zero"),
     ("8280808080808080808000", "longer than 10"), ("82808080808080808000", "64 bits")],
)  # fmt: skip
def test_malformed_varints_are_errors(encoded: str, why: str) -> None:
    with pytest.raises(NegentropyError, match=why):
        decode_varint(bytes.fromhex(encoded))


def test_bounds_delta_encode_timestamps_within_one_message() -> None:
    writer = BoundWriter()
    # 1000 + 1 = 1001 = 7 * 128 + 105 -> 87 69; no id prefix
    assert writer.encode(Bound(1000)).hex() == "876900"
    # same timestamp: offset 0 -> 01; a one-byte prefix
    assert writer.encode(Bound(1000, b"\xab")).hex() == "0101ab"
    assert writer.encode(Bound(1002)).hex() == "0300"
    assert writer.encode(Bound(INFINITY)).hex() == "0000"
    reader, bounds = Reader(bytes.fromhex("8769000101ab03000000")), BoundReader()
    decoded = [bounds.decode(reader) for _ in range(4)]
    assert decoded == [Bound(1000), Bound(1000, b"\xab"), Bound(1002), Bound(INFINITY)]


def test_bound_prefixes_are_zero_padded_and_at_most_32_bytes() -> None:
    assert Bound(5, b"\xaa").key == (5, b"\xaa" + bytes(31))
    with pytest.raises(NegentropyError, match="at most 32"):
        BoundReader().decode(Reader(bytes.fromhex("0121") + bytes(33)))
    with pytest.raises(NegentropyError, match="truncated"):
        BoundReader().decode(Reader(bytes.fromhex("0104aabb")))


def test_minimal_bounds_separate_neighbours_with_the_shortest_prefix() -> None:
    a = (5, bytes.fromhex("aabb") + bytes(30))
    b = (5, bytes.fromhex("aacc") + bytes(30))
    assert _minimal_bound(a, b) == Bound(5, bytes.fromhex("aacc"))
    assert _minimal_bound(a, (6, a[1])) == Bound(6)


def _id(value: int) -> bytes:
    return value.to_bytes(32, "little")


def test_fingerprints_hash_the_id_sum_mod_2_256_and_the_count() -> None:
    assert fingerprint_of(0, 0) == hashlib.sha256(bytes(32) + b"\x00").digest()[:16]
    one = hashlib.sha256(_id(1) + b"\x01").digest()[:16]
    assert VectorStorage([(7, _id(1))]).fingerprint(0, 1) == one
    # (2**256 - 1) + 2 wraps to 1; the count (2) still tells the sets apart
    wrapped = VectorStorage([(1, _id(2**256 - 1)), (2, _id(2))]).fingerprint(0, 2)
    assert wrapped == hashlib.sha256(_id(1) + b"\x02").digest()[:16]
    assert wrapped != one


def test_two_empty_sets_agree_in_one_round_of_id_lists() -> None:
    client, server = Negentropy(VectorStorage([])), Negentropy(VectorStorage([]))
    first = client.initiate()
    assert first.hex() == "6100000200"  # version, bound infinity, IdList of 0
    reply = server.respond(first)
    assert reply.hex() == "6100000200"
    done = client.step(reply)
    assert (done.message, done.have, done.need) == (None, [], [])


def test_an_unknown_version_gets_the_one_byte_downgrade_reply() -> None:
    server = Negentropy(VectorStorage([]))
    assert server.respond(bytes.fromhex("62000000")) == b"\x61"
    with pytest.raises(UnsupportedVersion):
        Negentropy(VectorStorage([])).step(b"\x62")
    with pytest.raises(NegentropyError, match="invalid protocol version"):
        server.respond(b"\x01")


@pytest.mark.parametrize(
    ("message", "why"),
    [("61" "81", "truncated varint"),
     ("61" "05" "02", "truncated bound"),
     ("61" "0500" "01" "00", "truncated fingerprint"),
     # deltas are unsigned, so only an id prefix can go backwards
     ("61" "0601bb" "00" "0101aa" "00", "out of order"),
     ("61" "0000" "02" "02" + "00" * 40, "longer than the message"),
     ("61" "0500" "07", "unknown range mode"),
     ("61" "0000" "00" "0200" "00", "after the infinity")],
)  # fmt: skip
def test_malformed_messages_are_errors(message: str, why: str) -> None:
    server = Negentropy(VectorStorage([(1, _id(9))]))
    with pytest.raises(NegentropyError, match=why):
        server.respond(bytes.fromhex(message))


def test_item_ids_are_the_digest_inside_the_cid() -> None:
    cid = "bafyreiafszluq47yac2nxegvrqd64hoy5oeydra346e2jp67gtx73l4lzu"
    item_id = id_from_cid(cid)
    assert len(item_id) == 32
    assert cid_from_id(item_id) == cid
    assert id_from_logged_cid(cid) == item_id
