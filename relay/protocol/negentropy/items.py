"""DFOS ops as Negentropy items: the id is the SHA-256 digest inside the
op's CID (every op is CIDv1 dag-cbor sha2-256, so the CID is rebuilt from
the id alone); the timestamp is the payload's createdAt in milliseconds,
or 0 for one before 1970 (the wire's timestamps are unsigned, and every
relay maps such ops alike, so they still reconcile)."""

from __future__ import annotations

from ..cid import CID_PREFIX, cid_to_bytes
from ..encoding import _B32_TO_DIGITS, base32_encode
from .wire import ID_SIZE


def op_item(created_at_ms: int, logged_cid: str) -> tuple[int, bytes]:
    """The item of a sequenced op (``id_from_logged_cid``: its CID was
    checked); a createdAt before 1970 counts as 0."""
    return (created_at_ms if created_at_ms > 0 else 0), id_from_logged_cid(logged_cid)


def id_from_cid(cid: str) -> bytes:
    """The 32-byte digest of a ``bafyrei...`` CID (``MalformedError`` otherwise)."""
    return cid_to_bytes(cid)[len(CID_PREFIX) :]


def id_from_logged_cid(cid: str) -> bytes:
    """``id_from_cid`` without the validation, for CIDs the relay checked
    when it sequenced them (the index reads every log entry: this is its
    hot path). The 59 characters hold 36 bytes and 2 spare bits."""
    return (int(cid[1:].translate(_B32_TO_DIGITS), 32) >> 2).to_bytes(36, "big")[4:]


def cid_from_id(item_id: bytes) -> str:
    if len(item_id) != ID_SIZE:
        raise ValueError(f"an id is {ID_SIZE} bytes, got {len(item_id)}")
    return "b" + base32_encode(CID_PREFIX + item_id)
