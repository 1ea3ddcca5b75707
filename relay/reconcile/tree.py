"""A B+tree of Negentropy items with cached subtree counts and id sums.

Insert, rank (``lower_bound``), ``item`` and range fingerprints are
O(log n): internal nodes keep each child's count and unreduced id sum, so
a prefix sum is one descent; only the final leaf (at most ``LEAF_MAX``
items) is scanned. Leaves are linked for range iteration. Items are never
removed (the log is append-only); a store that shrinks is re-indexed
from scratch by the owner.

Memory (issue 17): a leaf holds each item as one ``bytes`` key, the
timestamp (biased, big-endian) then the id, which sorts like the
``(timestamp, id)`` tuple; ``Item`` tuples are rebuilt on read. Id values
are not kept: a partial leaf sum converts at most half a leaf.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from relay.protocol.negentropy import Item, fingerprint_of

LEAF_MAX = 32
NODE_MAX = 64


_BIAS = 2**64  # timestamps in [-2**64, 2**8 * 2**64): 9 unsigned bytes
_STAMP = 9


def _key(item: Item) -> bytes:
    return (item[0] + _BIAS).to_bytes(_STAMP, "big") + item[1]


def _item(key: bytes) -> Item:
    return int.from_bytes(key[:_STAMP], "big") - _BIAS, key[_STAMP:]


def _value(key: bytes) -> int:
    return int.from_bytes(key[_STAMP:], "little")


class _Leaf:
    __slots__ = ("count", "keys", "next", "sum")

    def __init__(self, keys: list[bytes]) -> None:
        self.keys = keys
        self.count: int = len(keys)
        self.sum: int = sum(map(_value, keys))
        self.next: _Leaf | None = None

    def prefix_sum(self, index: int) -> int:
        """The sum of the first ``index`` ids, converting the shorter side."""
        if index <= self.count // 2:
            return sum([int.from_bytes(k[_STAMP:], "little") for k in self.keys[:index]])
        return self.sum - sum([int.from_bytes(k[_STAMP:], "little") for k in self.keys[index:]])


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
    return node.keys[0]


class FingerprintTree:
    """Implements ``relay.protocol.negentropy.Storage``."""

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._root: _Leaf | _Node = _Leaf([])
        self.load(items)

    # -- building ----------------------------------------------------------
    def load(self, items: Iterable[Item]) -> None:
        """Replace the contents with ``items`` (bulk build, O(n log n))."""
        keys = sorted(set(map(_key, items)))
        if not keys:
            self._root = _Leaf([])
            return
        fill = LEAF_MAX * 3 // 4  # room to grow before the first splits
        leaves = [_Leaf(keys[at : at + fill]) for at in range(0, len(keys), fill)]
        for left, right in itertools.pairwise(leaves):
            left.next = right
        level: list[_Leaf | _Node] = list(leaves)
        while len(level) > 1:
            level = [_Node(level[at : at + fill]) for at in range(0, len(level), fill)]
        self._root = level[0]

    def insert(self, item: Item) -> bool:
        """Add ``item``; False if it was already present."""
        key = _key(item)
        path: list[tuple[_Node, int]] = []
        node = self._root
        while isinstance(node, _Node):
            at = bisect_right(node.mins, key) - 1
            if at < 0:
                at = 0
            path.append((node, at))
            node = node.children[at]
        keys = node.keys
        pos = bisect_left(keys, key)
        if pos < len(keys) and keys[pos] == key:
            return False
        value = _value(key)
        keys.insert(pos, key)
        node.count += 1
        node.sum += value
        for parent, at in path:
            parent.count += 1
            parent.sum += value
            if not at and key < parent.mins[0]:
                parent.mins[0] = key
        if len(keys) > LEAF_MAX:
            self._split_up(node, path)
        return True

    def _split_up(self, node: _Leaf | _Node, path: list[tuple[_Node, int]]) -> None:
        while len(node.keys if isinstance(node, _Leaf) else node.children) > _cap(node):
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
        return _item(leaf.keys[offset])

    def items(self, lo: int, hi: int) -> Iterator[Item]:
        if lo >= hi:
            return
        leaf: _Leaf | None
        leaf, offset = self._locate(lo)
        remaining = hi - lo
        while leaf is not None and remaining > 0:
            chunk = leaf.keys[offset : offset + remaining]
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
        return rank + bisect_left(node.keys, key)

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
        half = len(node.keys) // 2
        right = _Leaf(node.keys[half:])
        del node.keys[half:]
        right.next, node.next = node.next, right
    else:
        half = len(node.children) // 2
        right = _Node(node.children[half:])
        del node.children[half:], node.mins[half:]
    node.count -= right.count
    node.sum -= right.sum
    return right
