"""What reconciliation reads: items sorted by (timestamp, id), addressed
by index, with range fingerprints.

``fingerprint_of`` is the V1 algorithm: SHA-256 over the sum of the ids
(little-endian 256-bit integers, mod 2**256) followed by the varint count,
truncated to 16 bytes. Storages keep sums unreduced and reduce here.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Protocol

from .wire import FINGERPRINT_SIZE, ID_SIZE, INFINITY, encode_varint

Item = tuple[int, bytes]  # (timestamp, 32-byte id)

_MOD = 2**256


def fingerprint_of(id_sum: int, count: int) -> bytes:
    data = (id_sum % _MOD).to_bytes(ID_SIZE, "little") + encode_varint(count)
    return hashlib.sha256(data).digest()[:FINGERPRINT_SIZE]


def id_value(item_id: bytes) -> int:
    return int.from_bytes(item_id, "little")


class Storage(Protocol):
    """Sorted, indexable items. Indexes are 0-based; ranges are [lo, hi)."""

    def size(self) -> int: ...
    def item(self, index: int) -> Item: ...
    def items(self, lo: int, hi: int) -> Iterator[Item]: ...
    def lower_bound(self, key: Item) -> int:
        """The index of the first item >= ``key`` (``size()`` if none)."""
        ...

    def fingerprint(self, lo: int, hi: int) -> bytes: ...


def check_item(item: Item) -> Item:
    timestamp, item_id = item
    if not 0 <= timestamp < INFINITY:
        raise ValueError("item timestamps are below 2**64 - 1")
    if len(item_id) != ID_SIZE:
        raise ValueError(f"item ids are {ID_SIZE} bytes")
    return item


class VectorStorage:
    """A sealed sorted array with prefix sums: O(log n) lookups, O(1)
    fingerprints. For sets built once (a scope, a client, the tests)."""

    def __init__(self, items: Iterable[Item]) -> None:
        self._items = sorted({check_item(i) for i in items})
        sums = [0]
        for _, item_id in self._items:
            sums.append(sums[-1] + id_value(item_id))
        self._sums = sums

    def size(self) -> int:
        return len(self._items)

    def item(self, index: int) -> Item:
        return self._items[index]

    def items(self, lo: int, hi: int) -> Iterator[Item]:
        return iter(self._items[lo:hi])

    def lower_bound(self, key: Item) -> int:
        return bisect_left(self._items, key)

    def fingerprint(self, lo: int, hi: int) -> bytes:
        return fingerprint_of(self._sums[hi] - self._sums[lo], hi - lo)


class StorageWindow:
    """The items of ``base`` with ``since <= timestamp < until`` as a
    storage of their own (partial and incremental sync by time window)."""

    def __init__(self, base: Storage, since: int = 0, until: int = INFINITY) -> None:
        self._base = base
        self._lo = base.lower_bound((since, b""))
        self._hi = base.size() if until >= INFINITY else base.lower_bound((until, b""))
        self._hi = max(self._hi, self._lo)

    def size(self) -> int:
        return self._hi - self._lo

    def item(self, index: int) -> Item:
        return self._base.item(self._lo + index)

    def items(self, lo: int, hi: int) -> Iterator[Item]:
        return self._base.items(self._lo + lo, self._lo + hi)

    def lower_bound(self, key: Item) -> int:
        index = self._base.lower_bound(key)
        return min(max(index, self._lo), self._hi) - self._lo

    def fingerprint(self, lo: int, hi: int) -> bytes:
        return self._base.fingerprint(self._lo + lo, self._lo + hi)
