"""Canonical dag-cbor: key order, shortest integers, integral numbers as integers,
64-bit floats only for non-integral numbers (PROTOCOL.md "CID Construction")."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.protocol import MalformedError, cid_of, decode_jws, encode_canonical

from .conftest import vector

GENESIS_CBOR_HEX = (
    "a66474797065666372656174656776657273696f6e0168617574684b65797381a3626964781a6b"
    "65795f72396576333466766332337a393939766561616674386474797065684d756c74696b6579"
    "727075626c69634b65794d756c74696261736578307a364d6b727a4c4d4e776f4a535634503359"
    "6363576362746b387664394c74674d4b6e4c6561444c55714c7541536a62696372656174656441"
    "747818323032362d30332d30375430303a30303a30302e3030305a6a6173736572744b65797381"
    "a3626964781a6b65795f72396576333466766332337a393939766561616674386474797065684d"
    "756c74696b6579727075626c69634b65794d756c74696261736578307a364d6b727a4c4d4e776f"
    "4a5356345033596363576362746b387664394c74674d4b6e4c6561444c55714c7541536a626e63"
    "6f6e74726f6c6c65724b65797381a3626964781a6b65795f72396576333466766332337a393939"
    "766561616674386474797065684d756c74696b6579727075626c69634b65794d756c7469626173"
    "6578307a364d6b727a4c4d4e776f4a5356345033596363576362746b387664394c74674d4b6e4c"
    "6561444c55714c7541536a62"
)


def test_number_encoding_vector_uses_cbor_integer() -> None:
    cbor = encode_canonical({"version": 1, "type": "test"})
    assert cbor.hex() == "a2647479706564746573746776657273696f6e01"
    assert len(cbor) == 20 and cbor[19] == 0x01


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('{"version":1,"type":"test"}', id="json-integer"),
        pytest.param('{"version":1.0,"type":"test"}', id="json-float-1.0"),
        pytest.param('{"type":"test","version":1e0}', id="json-exponent-reordered"),
    ],
)
def test_integral_json_numbers_give_the_integer_cid(source: str) -> None:
    assert (
        cid_of(json.loads(source)) == "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa"
    )


def test_float_encoding_trap_cid_is_never_produced() -> None:
    wrong = bytes.fromhex("a2647479706564746573746776657273696f6ef93c00")
    assert encode_canonical({"version": 1.0, "type": "test"}) != wrong


def test_genesis_identity_operation_cbor_is_byte_exact() -> None:
    payload = decode_jws(vector("identity-genesis")["chain"][0]).payload
    cbor = encode_canonical(payload)
    assert len(cbor) == 441
    assert cbor.hex() == GENESIS_CBOR_HEX


def test_map_keys_sort_by_length_then_bytewise() -> None:
    value = {"bb": 1, "a": 2, "ab": 3, "c": 4, "aaa": 5}
    assert list(cbor2.loads(encode_canonical(value)).keys()) == ["a", "c", "ab", "bb", "aaa"]


@pytest.mark.parametrize(
    ("value", "hex_"),
    [
        pytest.param(0, "00", id="0"),
        pytest.param(23, "17", id="23-inline"),
        pytest.param(24, "1818", id="24-one-byte"),
        pytest.param(255, "18ff", id="255"),
        pytest.param(256, "190100", id="256-two-bytes"),
        pytest.param(65536, "1a00010000", id="65536-four-bytes"),
        pytest.param(2**32, "1b0000000100000000", id="2^32-eight-bytes"),
        pytest.param(-1, "20", id="minus-1"),
        pytest.param(-25, "3818", id="minus-25"),
        pytest.param(2**53 - 1, "1b001fffffffffffff", id="max-safe-integer"),
        pytest.param(-0.0, "00", id="negative-zero-is-integer-0"),
        pytest.param(1.5, "fb3ff8000000000000", id="float-never-shrunk"),
        pytest.param(True, "f5", id="true"),
        pytest.param(False, "f4", id="false"),
        pytest.param(None, "f6", id="null"),
        pytest.param("", "60", id="empty-string"),
        pytest.param("\u00fc", "62c3bc", id="utf8-string"),
        pytest.param([], "80", id="empty-array"),
        pytest.param({}, "a0", id="empty-map"),
    ],
)
def test_scalar_encodings(value: object, hex_: str) -> None:
    assert encode_canonical(value).hex() == hex_


def test_unsafe_integers_encode_like_javascript_doubles() -> None:
    # JSON.parse yields a double for these, which the reference encodes as float64.
    assert encode_canonical(2**53) == b"\xfb" + struct.pack(">d", 2.0**53)
    assert encode_canonical(1e20) == b"\xfb" + struct.pack(">d", 1e20)
    assert encode_canonical(10**20) == encode_canonical(1e20)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(math.nan, id="nan"),
        pytest.param(math.inf, id="inf"),
        pytest.param(-math.inf, id="minus-inf"),
        pytest.param(10**400, id="integer-beyond-double"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param({1: "x"}, id="non-string-key"),
        pytest.param({"x": {1, 2}}, id="set"),
        pytest.param("\ud800", id="lone-surrogate"),
    ],
)
def test_non_json_values_are_rejected(value: object) -> None:
    with pytest.raises(MalformedError):
        encode_canonical(value)


def test_deep_nesting_is_rejected_not_crashing() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(MalformedError):
        encode_canonical(value)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@given(json_values)
def test_matches_cbor2_canonical_for_integer_only_values(value: object) -> None:
    # Without floats, RFC 7049 canonical CBOR (cbor2) and dag-cbor agree byte for byte.
    assert encode_canonical(value) == cbor2.dumps(value, canonical=True)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=8), st.randoms())
def test_encoding_is_independent_of_insertion_order(value: dict[str, object], rnd: Any) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    assert encode_canonical(dict(items)) == encode_canonical(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_round_trip_and_integral_floats_become_integers(x: float) -> None:
    decoded = cbor2.loads(encode_canonical(x))
    assert decoded == x
    if x.is_integer() and abs(x) < 2**53:
        assert type(decoded) is int
    else:
        assert encode_canonical(x)[0] == 0xFB
