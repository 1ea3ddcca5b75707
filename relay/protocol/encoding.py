"""Byte-to-text encodings used on the wire: base64url, base32lower, base58btc.

Role: strict codecs for JWS segments (RFC 7515 base64url, no padding), CID
strings (RFC 4648 base32, lowercase, no padding) and multikeys (base58btc,
Bitcoin alphabet).

Invariants: decoders accept exactly the canonical text an encoder would
produce - no padding, no foreign characters, no non-zero trailing bits -
because a second spelling of the same bytes would give a second JWS token
for one CID. Decoders raise ``MalformedError``; encoders never fail.
"""

from __future__ import annotations

import base64
import binascii
import re

from .errors import MalformedError

__all__ = [
    "b64url_decode",
    "b64url_encode",
    "base32_decode",
    "base32_encode",
    "base58btc_decode",
    "base58btc_encode",
]

_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")
_B64URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_B64URL_VALUE = {c: i for i, c in enumerate(_B64URL_ALPHABET)}
# bytes.translate runs in C; str.translate with a dict table is ~10x slower.
_B64_FROM_URL = bytes.maketrans(b"-_", b"+/")

_B32_RE = re.compile(r"[a-z2-7]*")
_B32_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_B32_VALUE = {c: i for i, c in enumerate(_B32_ALPHABET)}
# CIDs are decoded on every operation: map the alphabet onto int()'s base-32
# digits and let int() (C) do the work; base64.b32decode loops in Python.
_B32_TO_DIGITS = str.maketrans(_B32_ALPHABET, "0123456789abcdefghijklmnopqrstuv")
_B32_PAIRS = [a + b for a in _B32_ALPHABET for b in _B32_ALPHABET]  # 10 bits each
# Unused low bits in the last character, by (text length mod 8); None = impossible length.
_B32_SPARE_BITS = {0: 0, 2: 2, 4: 4, 5: 1, 7: 3}

_B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_VALUE = {c: i for i, c in enumerate(_B58_ALPHABET)}


def b64url_encode(data: bytes) -> str:
    """Encode bytes as unpadded base64url."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode unpadded, canonical base64url; raise ``MalformedError`` otherwise."""
    if not isinstance(text, str) or _B64URL_RE.fullmatch(text) is None:
        raise MalformedError("invalid base64url")
    rem = len(text) % 4
    if rem == 1:
        raise MalformedError("invalid base64url length")
    # Reject non-zero spare bits in the final character (non-canonical spelling).
    if rem and _B64URL_VALUE[text[-1]] & (0x0F if rem == 2 else 0x03):
        raise MalformedError("non-canonical base64url")
    try:
        std = text.encode("ascii").translate(_B64_FROM_URL)
        return binascii.a2b_base64(std + b"=" * (-len(text) % 4))
    except binascii.Error as exc:  # pragma: no cover - input already validated
        raise MalformedError("invalid base64url") from exc


def base32_encode(data: bytes) -> str:
    """Encode bytes as RFC 4648 base32, lowercase, unpadded."""
    bits = len(data) * 8
    pad = -bits % 10
    n = int.from_bytes(data, "big") << pad
    pairs = (bits + pad) // 10
    text = "".join([_B32_PAIRS[(n >> (10 * i)) & 0x3FF] for i in range(pairs - 1, -1, -1)])
    return text[: (bits + 4) // 5]


def base32_decode(text: str) -> bytes:
    """Decode lowercase unpadded canonical base32; raise ``MalformedError`` otherwise."""
    if not isinstance(text, str) or _B32_RE.fullmatch(text) is None:
        raise MalformedError("invalid base32")
    spare = _B32_SPARE_BITS.get(len(text) % 8)
    if spare is None:
        raise MalformedError("invalid base32 length")
    if spare and _B32_VALUE[text[-1]] & ((1 << spare) - 1):
        raise MalformedError("non-canonical base32")
    if not text:
        return b""
    # The regex admitted only alphabet characters, so int() sees plain digits.
    n = int(text.translate(_B32_TO_DIGITS), 32) >> spare
    return n.to_bytes(len(text) * 5 // 8, "big")


def base58btc_encode(data: bytes) -> str:
    """Encode bytes as base58btc (leading zero bytes become '1')."""
    zeros = len(data) - len(data.lstrip(b"\x00"))
    n = int.from_bytes(data, "big")
    out: list[str] = []
    while n:
        n, r = divmod(n, 58)
        out.append(_B58_ALPHABET[r])
    return "1" * zeros + "".join(reversed(out))


def base58btc_decode(text: str) -> bytes:
    """Decode base58btc; raise ``MalformedError`` on characters outside the alphabet."""
    if not isinstance(text, str):
        raise MalformedError("invalid base58btc")
    n = 0
    try:
        for c in text:
            n = n * 58 + _B58_VALUE[c]
    except KeyError as exc:
        raise MalformedError("invalid base58btc character") from exc
    zeros = len(text) - len(text.lstrip("1"))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\x00" * zeros + body
