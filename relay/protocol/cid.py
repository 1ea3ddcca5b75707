"""CIDv1 construction for dag-cbor payloads (PROTOCOL.md "CID Construction").

Role: map canonical CBOR bytes to the CID string that addresses operations and
documents: ``0x01 (v1) 0x71 (dag-cbor) 0x12 (sha2-256) 0x20 (32) || digest``,
multibase base32lower with the ``b`` prefix (always ``bafyrei...``).

Invariant: only this one CID shape exists in the protocol; ``cid_to_bytes`` and
``is_cid`` accept nothing else (no CIDv0, no other codecs or hashes).
"""

from __future__ import annotations

import hashlib
import re

from .dagcbor import encode_canonical
from .encoding import base32_decode, base32_encode
from .errors import MalformedError

__all__ = ["CID_PREFIX", "cid_from_cbor", "cid_of", "cid_to_bytes", "is_cid"]

CID_PREFIX = b"\x01\x71\x12\x20"
_CID_BYTES_LEN = len(CID_PREFIX) + 32
_CID_TEXT_LEN = 59  # "b" + 58 base32 chars for 36 bytes
# The same test as decoding, as one regex (``is_cid`` runs on every token):
# "b", then the prefix bytes 01 71 12 20 spell "afyrei" plus the top two bits
# (00) of the next character (so a-h), 50 free characters, and a last one
# whose two spare low bits are zero (a e i m q u y 4).
_CID_RE = re.compile(r"bafyrei[a-h][a-z2-7]{50}[aeimquy4]")


def cid_from_cbor(cbor: bytes) -> str:
    """Return the CID string of already-encoded canonical dag-cbor bytes."""
    return "b" + base32_encode(CID_PREFIX + hashlib.sha256(cbor).digest())


def cid_of(value: object) -> str:
    """Return the CID string of a JSON-like value (canonical dag-cbor, sha2-256)."""
    return cid_from_cbor(encode_canonical(value))


def cid_to_bytes(cid: str) -> bytes:
    """Decode a ``bafyrei...`` CID string to its 36 raw bytes.

    Raises ``MalformedError`` unless it is a CIDv1 dag-cbor sha2-256 in base32lower.
    """
    if not isinstance(cid, str) or len(cid) != _CID_TEXT_LEN or cid[0] != "b":
        raise MalformedError("not a dag-cbor sha2-256 CIDv1")
    raw = base32_decode(cid[1:])
    if len(raw) != _CID_BYTES_LEN or not raw.startswith(CID_PREFIX):
        raise MalformedError("not a dag-cbor sha2-256 CIDv1")
    return raw


def is_cid(value: object) -> bool:
    """True if ``value`` is a CIDv1 dag-cbor sha2-256 base32lower string
    (exactly the strings ``cid_to_bytes`` accepts)."""
    return isinstance(value, str) and _CID_RE.fullmatch(value) is not None
