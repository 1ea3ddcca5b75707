"""W3C Multikey encoding of Ed25519 public keys (PROTOCOL.md "Multikey Encoding").

Role: ``z`` + base58btc(``0xed 0x01`` || 32-byte key) <-> raw public key.
``0xed 0x01`` is the unsigned-varint multicodec for ed25519-pub (237), not the
big-endian ``0x00ed``.

Invariant: decoding accepts only that exact shape (34 bytes after base58,
correct prefix) and raises ``MalformedError`` otherwise. Decoding is memoised
because the same few keys are decoded on every signature check.
"""

from __future__ import annotations

from functools import lru_cache

from .encoding import base58btc_decode, base58btc_encode
from .errors import MalformedError

__all__ = ["ED25519_MULTICODEC", "decode_multikey", "encode_multikey"]

ED25519_MULTICODEC = b"\xed\x01"
_MAX_MULTIKEY_CHARS = 128


def encode_multikey(public_key: bytes) -> str:
    """Encode a raw 32-byte Ed25519 public key as a ``z6Mk...`` multikey."""
    if len(public_key) != 32:
        raise ValueError("Ed25519 public keys are 32 bytes")
    return "z" + base58btc_encode(ED25519_MULTICODEC + public_key)


# The keys of the signers of recent ops (a precheck decodes its signers' keys
# per request). 100k ops of the bench workload miss once per distinct key at
# 1024 entries as at 8192; an entry is ~0.2 KB.
@lru_cache(maxsize=2048)
def _decode(text: str) -> bytes:
    if not text.startswith("z"):
        raise MalformedError("multikey must use base58btc ('z') multibase")
    raw = base58btc_decode(text[1:])
    if len(raw) != 34 or not raw.startswith(ED25519_MULTICODEC):
        raise MalformedError("multikey is not a 32-byte ed25519-pub key")
    return raw[2:]


def decode_multikey(text: str) -> bytes:
    """Decode a multikey string to the raw 32-byte Ed25519 public key."""
    # The length bound keeps hostile input out of the quadratic base58 decoder.
    if not isinstance(text, str) or len(text) > _MAX_MULTIKEY_CHARS:
        raise MalformedError("multikey must be a string of at most 128 characters")
    return _decode(text)
