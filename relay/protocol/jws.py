"""JWS compact serialization with EdDSA (PROTOCOL.md "JWS Envelope Format").

Role: decode a token into header, payload, signing input and signature;
sign header+payload the way the reference does (``JSON.stringify``: compact
separators, raw UTF-8, insertion order); verify the Ed25519 signature.

Invariants of ``decode_jws``: exactly three canonical base64url segments,
header and payload are JSON objects (strict UTF-8, no NaN/Infinity literals),
``alg`` is ``EdDSA``, the signature is 64 bytes, the token is at most 64 KiB.
It does NOT check the signature, ``typ``, ``kid`` or ``cid``; verifiers do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import orjson

from .encoding import b64url_decode, b64url_encode
from .errors import MalformedError, SignatureError
from .keys import verify_signature
from .records import quick_init
from .untrusted import MAX_JSON_DEPTH, is_text, nests_too_deep

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_TOKEN_CHARS",
    "DecodedJws",
    "Signer",
    "decode_jws",
    "json_compact",
    "sign_jws",
    "verify_jws",
]

MAX_TOKEN_CHARS = 64 * 1024


class Signer(Protocol):
    """Anything that signs bytes with Ed25519 (``Ed25519Keypair`` does)."""

    def sign(self, message: bytes) -> bytes: ...


def _reject_constant(name: str) -> object:
    raise MalformedError(f"JSON literal {name} is not allowed")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# orjson parses a segment ~4x faster than json and agrees with it on every
# text it accepts, but for integers beyond 64 bits (floats there, exact ints
# in json; from -2**63 - 1, 19 digits): a segment with a run of 19 digits
# goes the json way. So does any
# segment orjson refuses, so that json gives the verdict (and the message).
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS = b"0" * 19


@quick_init
@dataclass(frozen=True, slots=True)
class DecodedJws:
    """A structurally valid, not yet verified, JWS compact token."""

    token: str
    header: dict[str, object]
    payload: dict[str, object]
    signing_input: bytes
    signature: bytes
    # Results of work done ahead of the verifiers (see ``precheck.py``):
    # the payload's derived (CID, canonical CBOR), and a key the signature
    # is known to verify under. Verifiers reuse them instead of recomputing.
    payload_cid: tuple[str, bytes] | None = None
    verified_key: bytes | None = None

    @property
    def typ(self) -> str | None:
        value = self.header.get("typ")
        return value if isinstance(value, str) else None

    @property
    def kid(self) -> str | None:
        value = self.header.get("kid")
        return value if isinstance(value, str) else None

    @property
    def header_cid(self) -> str | None:
        value = self.header.get("cid")
        return value if isinstance(value, str) else None


def _parse_json(raw: bytes) -> object:
    if _LONG_DIGITS not in raw.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(raw)  # refuses lone surrogates itself
        except orjson.JSONDecodeError:
            pass
    value = _DECODER.decode(raw.decode("utf-8"))
    if b"\\u" in raw and not _is_text(value):
        # JSON's \ud800 escapes name no Unicode character: such a string has
        # no dag-cbor encoding (so no CID), and no UTF-8 for answers or stores
        raise ValueError("a string holds a lone surrogate")
    return value


def _is_text(value: object) -> bool:
    """Every string of ``value`` (keys too) is Unicode text (no lone surrogates)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not is_text(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _json_object(segment: str, what: str) -> dict[str, object]:
    raw = b64url_decode(segment)
    if nests_too_deep(raw):
        raise MalformedError(f"JWS {what} nests more than {MAX_JSON_DEPTH} deep")
    try:
        value = _parse_json(raw)
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError, bad UTF-8 and over-long integers.
        raise MalformedError(f"JWS {what} is not valid JSON") from exc
    if not isinstance(value, dict):
        raise MalformedError(f"JWS {what} must be a JSON object")
    return value


def token_hash(token: str) -> str:
    """A token's identity among the tokens of one CID (hex SHA-256 of its text):
    two senders' tokens of one payload differ in header or signature."""
    # surrogatepass: a token that is not text (a lone surrogate from JSON's
    # \ud800) still has a hash, for the rejection that names it
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def decode_jws(token: str) -> DecodedJws:
    """Split and decode a compact JWS; raise ``MalformedError`` if it is not well formed."""
    if not isinstance(token, str):
        raise MalformedError("JWS token must be a string")
    if len(token) > MAX_TOKEN_CHARS:
        raise MalformedError("JWS token exceeds 64 KiB")
    if not token.isascii():  # base64url segments and dots only
        raise MalformedError("JWS token must be ASCII")
    parts = token.split(".")
    if len(parts) != 3:
        raise MalformedError("JWS token must have three segments")
    header = _json_object(parts[0], "header")
    if header.get("alg") != "EdDSA":
        raise MalformedError("JWS alg must be EdDSA")
    payload = _json_object(parts[1], "payload")
    signature = b64url_decode(parts[2])
    if len(signature) != 64:
        raise MalformedError("JWS signature must be 64 bytes")
    signing_input = token[: len(parts[0]) + 1 + len(parts[1])].encode("ascii")
    return DecodedJws(token, header, payload, signing_input, signature)


def json_compact(value: Mapping[str, object]) -> bytes:
    """Serialize like JavaScript ``JSON.stringify``: no spaces, raw UTF-8, key order kept."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise MalformedError(f"cannot serialize JSON: {exc}") from exc


def sign_jws(header: Mapping[str, object], payload: Mapping[str, object], keypair: Signer) -> str:
    """Sign ``header`` and ``payload`` into a compact JWS token (header used as given)."""
    signing_input = b64url_encode(json_compact(header)) + "." + b64url_encode(json_compact(payload))
    signature = keypair.sign(signing_input.encode("ascii"))
    return signing_input + "." + b64url_encode(signature)


def verify_jws(decoded: DecodedJws, public_key: bytes) -> None:
    """Raise ``SignatureError`` unless the token's signature verifies under ``public_key``."""
    if decoded.verified_key is not None and decoded.verified_key == public_key:
        return
    if not verify_signature(public_key, decoded.signing_input, decoded.signature):
        raise SignatureError("invalid signature")
