"""The JWS segments are parsed by orjson where it gives exactly what json
gives, and by json otherwise: whatever the text, the decoded header and
payload (or the refusal) are those of the strict json decoder, which also
refuses a string naming a lone surrogate (no UTF-8 or dag-cbor encoding
takes one)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.protocol import MalformedError, b64url_encode, decode_jws

SIG = b64url_encode(b"\0" * 64)
HEADER = b64url_encode(b'{"alg":"EdDSA"}')

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _strict(text: bytes) -> object:
    def constant(name: str) -> object:
        raise ValueError(name)

    try:
        value = json.loads(text.decode("utf-8"), parse_constant=constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # text all through
    except (ValueError, RecursionError):
        return "refused"
    return value


def _ours(text: bytes) -> object:
    try:
        return decode_jws(f"{HEADER}.{b64url_encode(text)}.{SIG}").payload
    except MalformedError:
        return "refused"


def _same(text: bytes) -> None:
    expected = _strict(text)
    if not isinstance(expected, dict):
        expected = "refused"
    got = _ours(text)
    assert got == expected and repr(got) == repr(expected), text


@given(st.dictionaries(st.text(), values, max_size=5))
def test_payloads_decode_as_json_decodes_them(payload: dict[str, object]) -> None:
    _same(json.dumps(payload).encode())
    _same(json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@given(st.binary(max_size=40), st.integers(min_value=0, max_value=60))
def test_corrupted_payloads_decode_or_fail_as_json_does(junk: bytes, at: int) -> None:
    base = b'{"a":[1,2.5,"x\\u00e9"],"b":{"c":null,"d":true},"e":12345678901234567890123}'
    _same(base[:at] + junk + base[at:])


@pytest.mark.parametrize(
    "text",
    [
        b'{"a":18446744073709551616}',  # beyond 64 bits: an exact int, as json has it
        b'{"a":-9223372036854775809}',
        b'{"a":18446744073709551615}',
        b'{"a":1e400}',
        b'{"a":NaN}',
        b'{"a":"\\ud800"}',
        b'{"a":1,"a":2}',
        b'{"a":-0}',
        b'{"a":1.0}',
        b"[" * 3000 + b"]" * 3000,
        b"\xef\xbb\xbf{}",
        b'{"a":"\xff"}',
    ],
)
def test_edge_texts_decode_as_json_decodes_them(text: bytes) -> None:
    _same(text)
