"""Negentropy Protocol V1: range-based set reconciliation (pure).

Role: the wire (varints, bounds, ranges, fingerprints) and the algorithm
of both participants, over any ``Storage`` of sorted (timestamp, id)
items. Nothing here knows about DFOS beyond ``items``, which maps an op's
CID and createdAt to a Negentropy item and back.

Invariant: the bytes produced and accepted are exactly those of
``negentropy-protocol-v1.md``; choices the document leaves open (bucket
count, the size below which a range is sent as an id list, random split
points) only change how much is sent, never what is meant.
"""

from __future__ import annotations

from .items import cid_from_id, id_from_cid, id_from_logged_cid, op_item
from .reconciler import ClientRound, Negentropy, NegentropyOptions, Steps
from .storage import Item, Storage, StorageWindow, VectorStorage, fingerprint_of
from .wire import (
    ID_SIZE,
    INFINITY,
    PROTOCOL_VERSION,
    Bound,
    Mode,
    NegentropyError,
    UnsupportedVersion,
    decode_varint,
    encode_varint,
)

__all__ = [
    "ID_SIZE",
    "INFINITY",
    "PROTOCOL_VERSION",
    "Bound",
    "ClientRound",
    "Item",
    "Mode",
    "Negentropy",
    "NegentropyError",
    "NegentropyOptions",
    "Steps",
    "Storage",
    "StorageWindow",
    "UnsupportedVersion",
    "VectorStorage",
    "cid_from_id",
    "decode_varint",
    "encode_varint",
    "fingerprint_of",
    "id_from_cid",
    "id_from_logged_cid",
    "op_item",
]
