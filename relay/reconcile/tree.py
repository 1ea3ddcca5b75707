"""A B+tree of Negentropy items with cached subtree counts and id sums.

Insert, rank (``lower_bound``), ``item`` and range fingerprints are
O(log n): internal nodes keep each child's count and unreduced id sum, so
a prefix sum is one descent; only the final leaf (at most ``LEAF_MAX``
items) is scanned. Leaves are linked for range iteration. Items are never
removed (the log is append-only); a store that shrinks is re-indexed
from scratch by the owner.

Memory (issue 17): an item is a 41-byte key, the timestamp (biased,
big-endian) then the 32-byte id, which sorts like the ``(timestamp, id)``
tuple, and a leaf is its keys packed in one ``bytes`` (rebuilt on insert,
~1.3 KB); ``Item`` tuples are rebuilt on read. Id values are not kept: a
partial leaf sum converts at most half a leaf.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from relay.protocol.negentropy import ID_SIZE, Item, fingerprint_of

LEAF_MAX = 32
NODE_MAX = 64


_BIAS = 2**64  # timestamps in [-2**64, 2**8 * 2**64): 9 unsigned bytes
_STAMP = 9
_WIDTH = _STAMP + ID_SIZE


def _key(item: Item) -> bytes:
    return (item[0] + _BIAS).to_bytes(_STAMP, "big") + item[1]


def _stored_key(item: Item) -> bytes:
    if len(item[1]) != ID_SIZE:
        raise ValueError(f"item ids are {ID_SIZE} bytes")
    return _key(item)


def _item(key: bytes) -> Item:
    return int.from_bytes(key[:_STAMP], "big") - _BIAS, key[_STAMP:]


def _value(key: bytes) -> int:
    return int.from_bytes(key[_STAMP:], "little")


class _Leaf:
    __slots__ = ("count", "keys", "next", "sum")

    def __init__(self, keys: bytes) -> None:
        self.keys = keys  # ``count`` keys of ``_WIDTH`` bytes, ascending
        self.count: int = len(keys) // _WIDTH
        self.sum: int = self._sum(0, self.count)
        self.next: _Leaf | None = None

    def key(self, index: int) -> bytes:
        return self.keys[index * _WIDTH : (index + 1) * _WIDTH]

    def chunk(self, lo: int, hi: int) -> list[bytes]:
        return [self.key(i) for i in range(lo, min(hi, self.count))]

    def bisect_left(self, key: bytes) -> int:
        return bisect_left(range(self.count), key, key=self.key)

    def prefix_sum(self, index: int) -> int:
        """The sum of the first ``index`` ids, converting the shorter side."""
        if index <= self.count // 2:
            return self._sum(0, index)
        return self.sum - self._sum(index, self.count)

    def _sum(self, lo: int, hi: int) -> int:
        keys = self.keys
        return sum(
            [
                int.from_bytes(keys[at + _STAMP : at + _WIDTH], "little")
                for at in range(lo * _WIDTH, hi * _WIDTH, _WIDTH)
            ]
        )


class _Node:
    __slots__ = ("children", "count", "mins", "sum")

    def __init__(self, children: list[_Leaf | _Node]) -> None:
        self.children = children
        self.mins = [_first(c) for c in children]
        self.count: int = sum(c.count for c in children)
        self.sum: int = sum(c.sum for c in children)


def _first(node: _Leaf | _Node) -> bytes:
    while isinstance(node, _Node):
        node = node.children[0]
    return node.key(0)


class FingerprintTree:
    """Implements ``relay.protocol.negentropy.Storage``."""

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._root: _Leaf | _Node = _Leaf(b"")
        self.load(items)

    # -- building ----------------------------------------------------------
    def load(self, items: Iterable[Item]) -> None:
        """Replace the contents with ``items`` (bulk build, O(n log n))."""
        keys = sorted(set(map(_stored_key, items)))
        if not keys:
            self._root = _Leaf(b"")
            return
        fill = LEAF_MAX * 3 // 4  # room to grow before the first splits
        leaves = [_Leaf(b"".join(keys[at : at + fill])) for at in range(0, len(keys), fill)]
        for left, right in itertools.pairwise(leaves):
            left.next = right
        level: list[_Leaf | _Node] = list(leaves)
        while len(level) > 1:
            level = [_Node(level[at : at + fill]) for at in range(0, len(level), fill)]
        self._root = level[0]

    def insert(self, item: Item) -> bool:
        """Add ``item``; False if it was already present."""
        key = _stored_key(item)
        path: list[tuple[_Node, int]] = []
        node = self._root
        while isinstance(node, _Node):
            at = bisect_right(node.mins, key) - 1
            if at < 0:
                at = 0
            path.append((node, at))
            node = node.children[at]
        pos = node.bisect_left(key)
        if pos < node.count and node.key(pos) == key:
            return False
        value = _value(key)
        at_byte = pos * _WIDTH
        node.keys = node.keys[:at_byte] + key + node.keys[at_byte:]
        node.count += 1
        node.sum += value
        for parent, at in path:
            parent.count += 1
            parent.sum += value
            if not at and key < parent.mins[0]:
                parent.mins[0] = key
        if node.count > LEAF_MAX:
            self._split_up(node, path)
        return True

    def _split_up(self, node: _Leaf | _Node, path: list[tuple[_Node, int]]) -> None:
        while (node.count if isinstance(node, _Leaf) else len(node.children)) > _cap(node):
            right = _split(node)
            if not path:
                self._root = _Node([node, right])
                return
            parent, at = path.pop()
            parent.children.insert(at + 1, right)
            parent.mins.insert(at + 1, _first(right))
            node = parent

    # -- Storage -----------------------------------------------------------
    def size(self) -> int:
        return self._root.count

    def item(self, index: int) -> Item:
        leaf, offset = self._locate(index)
        return _item(leaf.key(offset))

    def items(self, lo: int, hi: int) -> Iterator[Item]:
        if lo >= hi:
            return
        leaf: _Leaf | None
        leaf, offset = self._locate(lo)
        remaining = hi - lo
        while leaf is not None and remaining > 0:
            chunk = leaf.chunk(offset, offset + remaining)
            yield from map(_item, chunk)
            remaining -= len(chunk)
            leaf, offset = leaf.next, 0

    def lower_bound(self, item: Item) -> int:
        key = _key(item)
        rank = 0
        node = self._root
        while isinstance(node, _Node):
            at = bisect_left(node.mins, key) - 1
            if at < 0:
                return rank
            for child in node.children[:at]:
                rank += child.count
            node = node.children[at]
        return rank + node.bisect_left(key)

    def fingerprint(self, lo: int, hi: int) -> bytes:
        return fingerprint_of(self._prefix_sum(hi) - self._prefix_sum(lo), hi - lo)

    # -- descent by index --------------------------------------------------
    def _locate(self, index: int) -> tuple[_Leaf, int]:
        if not 0 <= index < self._root.count:
            raise IndexError(index)
        node = self._root
        while isinstance(node, _Node):
            for child in node.children:
                if index < child.count:
                    node = child
                    break
                index -= child.count
        return node, index

    def _prefix_sum(self, index: int) -> int:
        """The unreduced sum of the first ``index`` ids."""
        total = 0
        node = self._root
        if index >= node.count:
            return node.sum
        while isinstance(node, _Node):
            for child in node.children:
                if index < child.count:
                    node = child
                    break
                index -= child.count
                total += child.sum
        return total + node.prefix_sum(index)


def _cap(node: _Leaf | _Node) -> int:
    return LEAF_MAX if isinstance(node, _Leaf) else NODE_MAX


def _split(node: _Leaf | _Node) -> _Leaf | _Node:
    """Move the upper half of ``node`` into a new right sibling."""
    right: _Leaf | _Node
    if isinstance(node, _Leaf):
        half = node.count // 2 * _WIDTH
        right = _Leaf(node.keys[half:])
        node.keys = node.keys[:half]
        right.next, node.next = node.next, right
    else:
        half = len(node.children) // 2
        right = _Node(node.children[half:])
        del node.children[half:], node.mins[half:]
    node.count -= right.count
    node.sum -= right.sum
    return right
