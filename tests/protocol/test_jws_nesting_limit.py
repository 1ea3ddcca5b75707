"""A token's header and payload nest at most ``MAX_JSON_DEPTH`` deep: the
verdict on a token is the limit's, the same on every call path, never how
much recursion the caller's stack left to the parser and the encoder."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from relay.protocol import MalformedError, b64url_encode, cid_of, decode_jws
from relay.protocol.jws import MAX_JSON_DEPTH

SIG = b64url_encode(b"\0" * 64)
HEADER = b64url_encode(b'{"alg":"EdDSA"}')


def _payload(depth: int, inside: bytes = b"") -> bytes:
    """An object (one level) holding arrays nested to ``depth`` in all."""
    return b'{"a":' + inside + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def _on_a_deep_stack(frames: int, call: Callable[[], object]) -> object:
    """``call()`` made ``frames`` Python frames deeper than here."""
    if frames == 0:
        return call()
    return _on_a_deep_stack(frames - 1, call)


def test_a_payload_at_the_limit_decodes_and_has_a_cid_on_a_deep_stack() -> None:
    token = f"{HEADER}.{b64url_encode(_payload(MAX_JSON_DEPTH))}.{SIG}"
    cid = _on_a_deep_stack(300, lambda: cid_of(decode_jws(token).payload))
    assert cid == cid_of(decode_jws(token).payload)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 900, 5000])
def test_a_payload_past_the_limit_is_malformed_on_a_shallow_stack(depth: int) -> None:
    token = f"{HEADER}.{b64url_encode(_payload(depth))}.{SIG}"
    with pytest.raises(MalformedError, match="nests more than"):
        decode_jws(token)


def test_a_header_past_the_limit_is_malformed() -> None:
    header = b'{"alg":"EdDSA","x":' + b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b"}"
    with pytest.raises(MalformedError, match="header nests more than"):
        decode_jws(f"{b64url_encode(header)}.{b64url_encode(b'{}')}.{SIG}")


@pytest.mark.parametrize(
    "inside",
    [
        pytest.param(b'"' + b"[" * 2000 + b'",', id="brackets-in-a-string"),
        pytest.param(b'"\\"' + b"{" * 2000 + b'",', id="after-an-escaped-quote"),
    ],
)
def test_brackets_inside_strings_do_not_nest(inside: bytes) -> None:
    payload = b'{"a":[' + inside + b"1]}"
    assert decode_jws(f"{HEADER}.{b64url_encode(payload)}.{SIG}").payload["a"] == [
        inside[1:-2].replace(b'\\"', b'"').decode(),
        1,
    ]


def test_an_escaped_backslash_ends_no_string() -> None:
    payload = b'{"a":"\\\\","b":' + b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b"}"
    with pytest.raises(MalformedError, match="nests more than"):
        decode_jws(f"{HEADER}.{b64url_encode(payload)}.{SIG}")
