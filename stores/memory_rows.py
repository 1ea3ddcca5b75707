"""Compact per-op rows of the in-memory store (issue 17: RSS per op).

The sequenced ops are an ``OpTable``: columns indexed by log position, so
an op's own objects are its strings and its seq (the CID index's value);
the chain logs hold log positions in an ``array``. Strings equal to one
the store already holds (a parent's CID, a chain id, a signer DID, a CID
inside a state) are kept as that one object, and a state snapshot is kept
as a tuple of its values behind a shared tuple of its keys (key sets
inside it are shared between roles and ops). Reads rebuild
``OperationRecord``/``LogEntry``: a read costs an allocation, a stored op
~0.6 KB less.

Not interned: strings no other row holds (a document CID), so the pool
of names grows only with chains and signers, never per op; such a string
starting like a CID is kept as ASCII bytes of the rest (~23 B less).
"""

from __future__ import annotations

import typing
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any, Union

from sortedcontainers import SortedList

from stores.base import (
    ChainKind,
    ChainRecord,
    FeedEntry,
    IdentityKeyRecord,
    LogEntry,
    OperationKind,
    OperationRecord,
)

# (keys, value, value, ...): a state dict without its per-op hash table
PackedState = tuple[Any, ...]


KINDS: tuple[OperationKind, ...] = typing.get_args(OperationKind)
_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}


class OpTable:
    """The sequenced ops, one column per field, indexed by log position
    (seq - 1). Per op this is 7 list slots, a byte and an 8-byte int: a
    slotted row object with its own ``seq`` and ``createdAt`` ints took
    ~90 B more. A purged position keeps ``None`` CID, token and state
    (positions are never reused). Reads rebuild the records."""

    __slots__ = (
        "author", "chain", "cid", "created", "holes", "kind", "parent", "seq_of", "state", "token",
    )  # fmt: skip

    def __init__(self) -> None:
        self.seq_of: dict[str, int] = {}  # CID -> seq of the ops not purged
        self.cid: list[str | None] = []
        self.token: list[str | None] = []
        self.kind = bytearray()  # index into KINDS
        self.chain: list[str] = []
        self.author: list[str] = []
        self.parent: list[str | None] = []
        self.created = array("q")
        self.state: list[PackedState | None] = []
        self.holes = 0  # purged positions: while none, a range of seqs is all live

    def __len__(self) -> int:
        return len(self.cid)

    def append(
        self, cid: str, token: str, kind: OperationKind, chain_id: str, author_did: str,
        parent_cid: str | None, created_at_ms: int,
    ) -> int:  # fmt: skip
        """Add an op (its state is set after: ``state[seq - 1]``); its seq."""
        self.cid.append(cid)
        self.token.append(token)
        self.kind.append(_KIND_CODE[kind])
        self.chain.append(chain_id)
        self.author.append(author_did)
        self.parent.append(parent_cid)
        self.created.append(created_at_ms)
        self.state.append(None)
        seq = self.seq_of[cid] = len(self.cid)
        return seq

    def remove(self, seq: int) -> None:
        at = seq - 1
        cid = self.cid[at]
        if cid is not None:
            del self.seq_of[cid]
            self.holes += 1
        self.cid[at] = self.token[at] = self.state[at] = None

    def kind_at(self, seq: int) -> OperationKind:
        return KINDS[self.kind[seq - 1]]

    def record(self, seq: int) -> OperationRecord:
        at = seq - 1
        return OperationRecord(
            self.cid[at], self.token[at], KINDS[self.kind[at]], self.chain[at],  # type: ignore[arg-type]
            self.author[at], self.parent[at], self.created[at], thaw_state(self.state[at]), seq,
        )  # fmt: skip

    def log_entry(self, seq: int) -> LogEntry:
        at = seq - 1
        return LogEntry(
            self.cid[at], self.token[at], KINDS[self.kind[at]], self.chain[at], seq,  # type: ignore[arg-type]
        )  # fmt: skip

    def feed_entry(self, seq: int) -> FeedEntry:
        at = seq - 1
        return FeedEntry(
            seq, self.cid[at], self.token[at], KINDS[self.kind[at]], self.chain[at],  # type: ignore[arg-type]
            self.author[at], self.created[at], self.parent[at], thaw_state(self.state[at]),
        )  # fmt: skip

    def live_after(self, start: int, limit: int, end: int | None = None) -> tuple[list[int], bool]:
        """Up to ``limit`` seqs of positions ``start:end`` that are not purged,
        and whether any live position follows them (before ``end``)."""
        cids = self.cid
        stop = len(cids) if end is None else min(end, len(cids))
        if not self.holes:
            last = max(min(start + limit, stop), start)
            return list(range(start + 1, last + 1)), last < stop
        out: list[int] = []
        i = start
        while i < stop and len(out) < limit:
            if cids[i] is not None:
                out.append(i + 1)
            i += 1
        more = any(cids[j] is not None for j in range(i, stop))
        return out, more

    def live(self) -> list[int]:
        """The seqs of every op not purged, ascending."""
        return [at + 1 for at, cid in enumerate(self.cid) if cid is not None]


_SEQ_BITS = 32  # a root's key: createdAt << 32 | seq (the memory store's seqs stay below)
_SEQ_MASK = (1 << _SEQ_BITS) - 1


class Roots:
    """The parentless ops in (createdAt, CID) order, for the changes feed.

    One int per op, ``createdAt << 32 | seq``: ~50 B less than a
    ``(createdAt, CID)`` tuple with its own int. Ops with one createdAt sort
    by seq here and are put in CID order as they are read."""

    __slots__ = ("_cids", "_keys")

    def __init__(self, ops: OpTable) -> None:
        self._keys = SortedList()
        self._cids = ops.cid

    def add(self, created_at_ms: int, seq: int) -> None:
        self._keys.add(created_at_ms << _SEQ_BITS | seq)

    def discard(self, created_at_ms: int, seq: int) -> None:
        self._keys.discard(created_at_ms << _SEQ_BITS | seq)

    def after(self, after: tuple[int, str] | None) -> Iterator[int]:
        """The seqs of the roots strictly after the (createdAt, CID) ``after``."""
        keys = self._keys
        start = 0 if after is None else keys.bisect_left(after[0] << _SEQ_BITS)
        group: list[int] = []  # the seqs of the roots of one createdAt
        created = 0
        for key in keys.islice(start):
            if key >> _SEQ_BITS != created or not group:
                if group:
                    yield from self._ordered(group, created, after)
                group, created = [], key >> _SEQ_BITS
            group.append(key & _SEQ_MASK)
        if group:
            yield from self._ordered(group, created, after)

    def _ordered(self, group: list[int], created: int, after: tuple[int, str] | None) -> list[int]:
        """The seqs of the roots of one createdAt in CID order, past ``after``
        (the first createdAt read may be ``after``'s own)."""
        if len(group) == 1 and (after is None or created != after[0]):
            return group
        cids = self._cids
        ordered = sorted((cids[seq - 1] or "", seq) for seq in group)
        return [seq for cid, seq in ordered if after is None or (created, cid) > after]


class StoredChain:
    __slots__ = ("chain_id", "genesis_cid", "head_cid", "head_created_at_ms", "kind", "state")

    def __init__(
        self,
        chain_id: str,
        kind: ChainKind,
        genesis_cid: str,
        head_cid: str,
        head_created_at_ms: int,
        state: PackedState,
    ) -> None:
        self.chain_id = chain_id
        self.kind: ChainKind = kind
        self.genesis_cid = genesis_cid
        self.head_cid = head_cid
        self.head_created_at_ms = head_created_at_ms
        self.state = state

    def record(self) -> ChainRecord:
        state = thaw_state(self.state)
        assert state is not None
        return ChainRecord(
            self.chain_id, self.kind, self.genesis_cid, self.head_cid,
            self.head_created_at_ms, state,
        )  # fmt: skip


class Interner:
    """Equal strings and key sets as one object, for the rows of one store."""

    def __init__(self, ops: OpTable) -> None:
        self._seq_of = ops.seq_of
        self._cids = ops.cid
        self._states = ops.state
        self._names: dict[str, str] = {}  # chain ids and DIDs
        self._frozen: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # state keys, key sets

    def cid(self, value: str | None) -> str | None:
        """The stored op's CID string if ``value`` names one (lookup only)."""
        if value is None:
            return None
        seq = self._seq_of.get(value)
        return value if seq is None else self._cids[seq - 1]

    def name(self, value: str) -> str:
        """A chain id or DID: pooled (one entry per chain or signer)."""
        seq = self._seq_of.get(value)  # a countersignature's chain is its target CID
        if seq is not None:
            return self._cids[seq - 1]  # type: ignore[return-value]
        return self._names.setdefault(value, value)

    def chain(self, chain: ChainRecord) -> StoredChain:
        state = self.pack_state(chain.state)
        assert state is not None
        head = self._seq_of.get(chain.head_cid)
        if head is not None and (own := self._states[head - 1]) == state:
            state = own  # the head op's own snapshot: one tuple for both
        return StoredChain(
            self.name(chain.chain_id), chain.kind, self.cid(chain.genesis_cid) or "",
            self.cid(chain.head_cid) or "", chain.head_created_at_ms, state,
        )  # fmt: skip

    def pack_state(self, state: dict[str, Any] | None) -> PackedState | None:
        if state is None:
            return None
        keys = tuple(state)
        values = (self._value(v)[0] for v in state.values())
        return (self._frozen.setdefault(keys, keys), *values)

    def _value(self, value: Any) -> tuple[Any, bool]:
        """The value to store, and whether it is made of strings only."""
        if type(value) is str:
            seq = self._seq_of.get(value)
            if seq is not None:
                return self._cids[seq - 1], True
            name = self._names.get(value)
            if name is not None:
                return name, True
            if value.startswith(_CID_HEAD) and value.isascii():  # a document CID, most often
                return value[len(_CID_HEAD) :].encode("ascii"), True  # 23 B less than the str
            return value, True
        if type(value) is list:
            parts = [self._value(v) for v in value]
            frozen = tuple(v for v, _ in parts)
            if all(shareable for _, shareable in parts):  # (1,) == (True,): never merged
                return self._frozen.setdefault(frozen, frozen), True
            return frozen, False
        return value, False


# The text every dag-cbor sha2-256 CIDv1 in base32 starts with. A string
# value starting so that no row holds is kept as the ASCII bytes of the rest.
_CID_HEAD = "bafyrei"


def thaw_state(packed: PackedState | None) -> dict[str, Any] | None:
    if packed is None:
        return None
    return {
        k: _thaw(v) if (kind := type(v)) is tuple or kind is bytes else v
        for k, v in zip(packed[0], packed[1:], strict=True)
    }


def _thaw(value: Any) -> Any:
    kind = type(value)
    if kind is tuple:
        return [_thaw(v) for v in value]
    if kind is bytes:  # no state value is bytes (JSON): a packed CID
        return _CID_HEAD + value.decode("ascii")
    return value


# The seqs of one chain's ops, ascending: a lone op's seq is its own int
# object (the CID index's value), a short chain a tuple of those ints (no new
# object per seq; most chains), a longer one 8 bytes a seq in an ``array``.
ChainSeqs = Union[int, tuple[int, ...], "array[int]"]
_TUPLE_MAX = 16  # a tuple is rebuilt per append: short chains only


def add_seq(index: MutableMapping[str, ChainSeqs], key: str, seq: int) -> None:
    held = index.get(key)
    if held is None:
        index[key] = seq
    elif isinstance(held, int):
        index[key] = (held, seq)
    elif isinstance(held, tuple):
        index[key] = (*held, seq) if len(held) < _TUPLE_MAX else array("q", (*held, seq))
    else:
        held.append(seq)


def seqs_of(index: Mapping[str, ChainSeqs], key: str) -> Sequence[int]:
    held = index.get(key)
    if held is None:
        return ()
    return (held,) if isinstance(held, int) else held


def drop_seq(index: MutableMapping[str, ChainSeqs], key: str, seq: int) -> None:
    held = index.get(key)
    if isinstance(held, int):
        if held == seq:
            del index[key]
    elif isinstance(held, tuple):
        index[key] = tuple(s for s in held if s != seq)
    elif held is not None:
        # ascending: found by bisection, and a purge drops the last first (a
        # scan per seq made purging a long chain quadratic)
        at = bisect_left(held, seq)
        if at < len(held) and held[at] == seq:
            del held[at]


# A target's countersignatures, witness DID -> token. Most targets have one
# witness: a (witness, token) pair instead of a dict (~130 B less a target).
Witnesses = tuple[str, str] | dict[str, str]


def add_witness(
    index: MutableMapping[str, Witnesses], target: str, witness: str, token: str
) -> None:
    held = index.get(target)
    if held is None:
        index[target] = (witness, token)
    elif isinstance(held, tuple):
        if held[0] != witness:  # the first countersignature of a witness stays
            index[target] = {held[0]: held[1], witness: token}
    else:
        held.setdefault(witness, token)


def witnesses_of(index: Mapping[str, Witnesses], target: str) -> Mapping[str, str]:
    held = index.get(target)
    if held is None:
        return {}
    return {held[0]: held[1]} if isinstance(held, tuple) else held


def drop_witness_token(index: MutableMapping[str, Witnesses], target: str, token: str) -> None:
    """Forget the countersignature ``token`` of ``target``, whoever signed it."""
    held = index.get(target)
    if isinstance(held, tuple):
        if held[1] == token:
            del index[target]
    elif held is not None:
        for witness in [w for w, t in held.items() if t == token]:
            del held[witness]


# An identity's keys in the order first seen: a tuple (few keys per identity;
# a dict used as an ordered set is ~0.2 KB each).
def add_key(
    index: MutableMapping[str, tuple[IdentityKeyRecord, ...]], key: IdentityKeyRecord
) -> None:
    held = index.get(key.did, ())
    if key not in held:
        index[key.did] = (*held, key)
