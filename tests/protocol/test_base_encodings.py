"""base64url (JWS), base32lower (CIDs) and base58btc (multikeys) are strict and canonical."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.protocol import (
    MalformedError,
    b64url_decode,
    b64url_encode,
    base32_decode,
    base32_encode,
    base58btc_decode,
    base58btc_encode,
)


@given(st.binary(max_size=200))
def test_b64url_round_trips_without_padding(data: bytes) -> None:
    text = b64url_encode(data)
    assert "=" not in text and "+" not in text and "/" not in text
    assert text == base64.urlsafe_b64encode(data).decode().rstrip("=")
    assert b64url_decode(text) == data


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("YQ==", id="padding"),
        pytest.param("a+b/", id="standard-alphabet"),
        pytest.param("abcde", id="length-mod-4-is-1"),
        pytest.param("YR", id="non-zero-spare-bits-1-byte"),
        pytest.param("YWJ", id="non-zero-spare-bits-2-bytes"),
        pytest.param("YW J", id="whitespace"),
        pytest.param("Y\u00e9", id="non-ascii"),
    ],
)
def test_b64url_rejects_non_canonical_text(text: str) -> None:
    with pytest.raises(MalformedError):
        b64url_decode(text)


@given(st.binary(max_size=80))
def test_base32_round_trips_lowercase_unpadded(data: bytes) -> None:
    text = base32_encode(data)
    assert text == base64.b32encode(data).decode().rstrip("=").lower()
    assert base32_decode(text) == data


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("MFRGG", id="uppercase"),
        pytest.param("mfrgg===", id="padding"),
        pytest.param("mfr", id="impossible-length"),
        pytest.param("mb", id="non-zero-spare-bits"),
        pytest.param("mf1g", id="digit-outside-alphabet"),
        # int(), which decodes after validation, would take these two
        pytest.param("mf_gg", id="underscore"),
        pytest.param(" mfrg", id="whitespace"),
    ],
)
def test_base32_rejects_non_canonical_text(text: str) -> None:
    with pytest.raises(MalformedError):
        base32_decode(text)


@given(st.binary(max_size=64))
def test_base58btc_round_trips_including_leading_zeros(data: bytes) -> None:
    assert base58btc_decode(base58btc_encode(data)) == data


@pytest.mark.parametrize(
    ("data", "text"),
    [
        pytest.param(b"", "", id="empty"),
        pytest.param(b"\x00\x00\x01", "112", id="leading-zeros"),
        pytest.param(b"hello world", "StV1DL6CwTryKyV", id="hello-world"),
    ],
)
def test_base58btc_known_values(data: bytes, text: str) -> None:
    assert base58btc_encode(data) == text
    assert base58btc_decode(text) == data


@pytest.mark.parametrize("text", ["0OIl", "abc0", "zz+"])
def test_base58btc_rejects_characters_outside_the_alphabet(text: str) -> None:
    with pytest.raises(MalformedError):
        base58btc_decode(text)
