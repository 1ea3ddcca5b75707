"""Derived identifiers: DIDs, content ids, key ids, and ``kid`` DID URLs.

Role: PROTOCOL.md "ID Alphabet" and DID-METHOD.md section 3. An id is the
first 22 bytes of ``SHA-256(input)``, each mapped to ``ALPHABET[byte % 19]``.
DIDs and content ids hash the raw bytes of the genesis CID; conventional key
ids hash the raw 32-byte public key.

Invariants: ``did:dfos:`` + exactly 22 alphabet characters is the only DID
form accepted here; a ``kid`` is either a bare key id or ``<dfos DID>#<key id>``
with both parts non-empty.
"""

from __future__ import annotations

import functools
import hashlib
import re

from .cid import cid_to_bytes
from .errors import MalformedError

__all__ = [
    "DID_PREFIX",
    "ID_ALPHABET",
    "ID_LENGTH",
    "KEY_ID_PREFIX",
    "chain_id_from_genesis_cid",
    "content_id_from_genesis_cid",
    "did_from_genesis_cid",
    "encode_id",
    "is_content_id",
    "is_dfos_did",
    "key_id_for_public_key",
    "split_kid",
]

ID_ALPHABET = "2346789acdefhknrtvz"
ID_LENGTH = 22
DID_PREFIX = "did:dfos:"
KEY_ID_PREFIX = "key_"

# bytes.translate maps every digest byte to its alphabet character in C.
_ID_TABLE = bytes(ord(ID_ALPHABET[b % len(ID_ALPHABET)]) for b in range(256))
_ID_RE = re.compile(f"[{ID_ALPHABET}]{{{ID_LENGTH}}}")
_DID_RE = re.compile(f"did:dfos:[{ID_ALPHABET}]{{{ID_LENGTH}}}")


def encode_id(data: bytes) -> str:
    """Hash ``data`` and encode the first 22 digest bytes in the id alphabet."""
    return hashlib.sha256(data).digest()[:ID_LENGTH].translate(_ID_TABLE).decode("ascii")


# Ingestion asks for the id of one genesis several times (precheck, routing,
# verification): a pure function of the CID, so a bounded memo. The asks fall
# within one request or woken cascade, and an entry holds its own CID string
# (~0.25 KB in all): a few requests' worth is enough.
@functools.lru_cache(maxsize=1024)
def chain_id_from_genesis_cid(cid: str) -> str:
    """Bare 22-char chain id derived from the raw bytes of a genesis CID."""
    return encode_id(cid_to_bytes(cid))


def did_from_genesis_cid(cid: str) -> str:
    """``did:dfos:<id>`` of the identity chain whose genesis has this CID."""
    return DID_PREFIX + chain_id_from_genesis_cid(cid)


def content_id_from_genesis_cid(cid: str) -> str:
    """Bare content id of the content chain whose genesis has this CID."""
    return chain_id_from_genesis_cid(cid)


def key_id_for_public_key(public_key: bytes) -> str:
    """Conventional key id ``key_<id>`` derived from a raw Ed25519 public key."""
    return KEY_ID_PREFIX + encode_id(public_key)


def is_dfos_did(value: object) -> bool:
    """True for ``did:dfos:`` followed by exactly 22 id-alphabet characters."""
    return isinstance(value, str) and _DID_RE.fullmatch(value) is not None


def is_content_id(value: object) -> bool:
    """True for a bare 22-character id-alphabet string."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def split_kid(kid: str) -> tuple[str | None, str]:
    """Split a JWS ``kid`` into ``(did, key_id)``.

    A DID URL ``did:dfos:<id>#<key>`` gives ``(did, key)``; a bare key id gives
    ``(None, kid)``. Raises ``MalformedError`` for an empty kid, an empty part,
    more than one ``#`` or a DID part that is not a ``did:dfos`` DID.
    Whether a bare kid is acceptable in context is the caller's decision.
    """
    if not isinstance(kid, str) or not kid:
        raise MalformedError("kid must be a non-empty string")
    did, sep, key_id = kid.partition("#")
    if not sep:
        return None, kid
    if not key_id or "#" in key_id:
        raise MalformedError("kid DID URL has no valid key id")
    if _DID_RE.fullmatch(did) is None:
        raise MalformedError("kid DID URL does not start with a did:dfos DID")
    return did, key_id
