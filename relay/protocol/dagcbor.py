"""Canonical dag-cbor encoder for JSON-like values.

Role: produce the exact bytes that are hashed into operation and document
CIDs (PROTOCOL.md "CID Construction", "Number Encoding"). This is the ingest
hot path, so it is a small hand-written encoder rather than a general library.

Invariants:
- map keys are text strings, sorted by encoded length first, then bytewise;
  for CBOR text keys that is exactly a bytewise sort of the encoded key;
- every integer uses the shortest head (major type 0/1);
- a number that is mathematically an integer is encoded as an integer even if
  JSON parsing produced a float (``1.0`` -> ``0x01``, never ``0xf9 3c00``);
- numbers beyond the JavaScript safe-integer range (|n| > 2**53 - 1) are
  encoded as 64-bit floats, which is what the reference encoder does with the
  double that ``JSON.parse`` yields; this keeps CIDs identical to the
  reference for such payloads;
- every other float is an 8-byte IEEE 754 double (``0xfb``), never shrunk;
- NaN, infinities, lone surrogates and non-JSON types raise ``MalformedError``.

Tuples are accepted as arrays for the convenience of callers building payloads.
"""

from __future__ import annotations

import math
import struct

from .errors import MalformedError

__all__ = ["MAX_SAFE_INTEGER", "encode_canonical"]

MAX_SAFE_INTEGER = 2**53 - 1
# Encoded text strings are memoised: keys ("version", "createdAt", ...) and many values
# ("Multikey", key ids, multikeys) repeat across every operation. The cache is bounded
# and simply reset when full; entries are pure functions of the key, so races are benign.
_STR_CACHE_LIMIT = 8192
_STR_CACHE_MAX_CHARS = 128
_str_cache: dict[str, bytes] = {}
_pack_double = struct.Struct(">d").pack


def encode_canonical(value: object) -> bytes:
    """Encode ``value`` as canonical dag-cbor bytes."""
    out = bytearray()
    try:
        _encode(value, out)
    except RecursionError as exc:
        raise MalformedError("value is nested too deeply") from exc
    return bytes(out)


def _head(major: int, n: int, out: bytearray) -> None:
    mt = major << 5
    if n < 24:
        out.append(mt | n)
    elif n < 0x100:
        out.append(mt | 24)
        out.append(n)
    elif n < 0x10000:
        out.append(mt | 25)
        out += n.to_bytes(2, "big")
    elif n < 0x1_0000_0000:
        out.append(mt | 26)
        out += n.to_bytes(4, "big")
    else:
        out.append(mt | 27)
        out += n.to_bytes(8, "big")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedError("string contains a lone surrogate") from exc


def _encoded_str(text: str) -> bytes:
    cached = _str_cache.get(text)
    if cached is not None:
        return cached
    raw = _utf8(text)
    if len(raw) < 24:
        encoded = bytes((0x60 | len(raw),)) + raw
    else:
        buf = bytearray()
        _head(3, len(raw), buf)
        buf += raw
        encoded = bytes(buf)
    if len(text) <= _STR_CACHE_MAX_CHARS:
        if len(_str_cache) >= _STR_CACHE_LIMIT:
            _str_cache.clear()
        _str_cache[text] = encoded
    return encoded


def _encoded_key(key: object) -> bytes:
    if type(key) is not str:
        raise MalformedError("map keys must be strings")
    return _encoded_str(key)


def _encode_int(n: int, out: bytearray) -> None:
    if n > MAX_SAFE_INTEGER or n < -MAX_SAFE_INTEGER:
        try:
            as_float = float(n)
        except OverflowError as exc:
            raise MalformedError("number out of range") from exc
        out.append(0xFB)
        out += _pack_double(as_float)
    elif n >= 0:
        _head(0, n, out)
    else:
        _head(1, -1 - n, out)


def _encode_float(x: float, out: bytearray) -> None:
    if not math.isfinite(x):
        raise MalformedError("NaN and Infinity are not allowed")
    if x.is_integer() and -MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER:
        _encode_int(int(x), out)
    else:
        out.append(0xFB)
        out += _pack_double(x)


def _encode(value: object, out: bytearray) -> None:
    t = type(value)
    if t is str:
        out += _encoded_str(value)  # type: ignore[arg-type]
    elif t is dict:
        # Encoded keys are distinct (UTF-8 is injective), so tuples sort by key alone.
        items = sorted([(_encoded_key(k), v) for k, v in value.items()])  # type: ignore[attr-defined]
        n = len(items)
        if n < 24:
            out.append(0xA0 | n)
        else:
            _head(5, n, out)
        for key, item in items:
            out += key
            _encode(item, out)
    elif t is list or t is tuple:
        n = len(value)  # type: ignore[arg-type]
        if n < 24:
            out.append(0x80 | n)
        else:
            _head(4, n, out)
        for item in value:  # type: ignore[attr-defined]
            _encode(item, out)
    elif t is int:
        _encode_int(value, out)  # type: ignore[arg-type]
    elif t is bool:
        out.append(0xF5 if value else 0xF4)
    elif value is None:
        out.append(0xF6)
    elif t is float:
        _encode_float(value, out)  # type: ignore[arg-type]
    else:
        raise MalformedError(f"cannot encode {t.__name__} as dag-cbor")
