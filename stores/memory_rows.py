"""Compact per-op rows of the in-memory store (issue 17: RSS per op).

One ``StoredOp`` per sequenced op is the only per-op object: the CID index
and the global log point at it, the chain logs hold its log position in an
``array``. Strings equal to one the store already holds (a parent's CID, a
chain id, a signer DID, a CID inside a state) are kept as that one object,
and a state snapshot is kept as a tuple of its values behind a shared tuple
of its keys (key sets inside it are shared between roles and ops). Reads
rebuild ``OperationRecord``/``LogEntry``: a read costs an allocation, a
stored op ~0.5 KB less.

Not interned: strings no other row holds (a document CID), so the pool
of names grows only with chains and signers, never per op.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Union

from stores.base import (
    ChainKind,
    ChainRecord,
    IdentityKeyRecord,
    LogEntry,
    OperationKind,
    OperationRecord,
)

# (keys, value, value, ...): a state dict without its per-op hash table
PackedState = tuple[Any, ...]


class StoredOp:
    __slots__ = (
        "author_did", "chain_id", "cid", "created_at_ms", "jws_token", "kind", "parent_cid",
        "seq", "state",
    )  # fmt: skip

    def __init__(
        self,
        cid: str,
        jws_token: str,
        kind: OperationKind,
        chain_id: str,
        author_did: str,
        parent_cid: str | None,
        created_at_ms: int,
        seq: int,
    ) -> None:
        self.cid = cid
        self.jws_token = jws_token
        self.kind: OperationKind = kind
        self.chain_id = chain_id
        self.author_did = author_did
        self.parent_cid = parent_cid
        self.created_at_ms = created_at_ms
        self.seq = seq
        self.state: PackedState | None = None

    def record(self) -> OperationRecord:
        return OperationRecord(
            self.cid, self.jws_token, self.kind, self.chain_id, self.author_did,
            self.parent_cid, self.created_at_ms, thaw_state(self.state), self.seq,
        )  # fmt: skip

    def log_entry(self) -> LogEntry:
        return LogEntry(self.cid, self.jws_token, self.kind, self.chain_id, self.seq)


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

    def __init__(self, ops: Mapping[str, StoredOp]) -> None:
        self._ops = ops
        self._names: dict[str, str] = {}  # chain ids and DIDs
        self._frozen: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # state keys, key sets

    def cid(self, value: str | None) -> str | None:
        """The stored op's CID string if ``value`` names one (lookup only)."""
        if value is None:
            return None
        row = self._ops.get(value)
        return value if row is None else row.cid

    def name(self, value: str) -> str:
        """A chain id or DID: pooled (one entry per chain or signer)."""
        row = self._ops.get(value)  # a countersignature's chain is its target CID
        if row is not None:
            return row.cid
        return self._names.setdefault(value, value)

    def chain(self, chain: ChainRecord) -> StoredChain:
        state = self.pack_state(chain.state)
        assert state is not None
        head = self._ops.get(chain.head_cid)
        if head is not None and head.state == state:
            state = head.state  # the head op's own snapshot: one tuple for both
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
            row = self._ops.get(value)
            return (self._names.get(value, value) if row is None else row.cid), True
        if type(value) is list:
            parts = [self._value(v) for v in value]
            frozen = tuple(v for v, _ in parts)
            if all(shareable for _, shareable in parts):  # (1,) == (True,): never merged
                return self._frozen.setdefault(frozen, frozen), True
            return frozen, False
        return value, False


def thaw_state(packed: PackedState | None) -> dict[str, Any] | None:
    if packed is None:
        return None
    return {k: _thaw(v) for k, v in zip(packed[0], packed[1:], strict=True)}


def _thaw(value: Any) -> Any:
    return [_thaw(v) for v in value] if type(value) is tuple else value


# The seqs of one chain's ops, ascending: a lone op's seq is its row's own int
# object (most countersigned targets, artifacts, beacons, short content chains).
ChainSeqs = Union[int, "array[int]"]


def add_seq(index: MutableMapping[str, ChainSeqs], key: str, seq: int) -> None:
    held = index.get(key)
    if held is None:
        index[key] = seq
    elif isinstance(held, int):
        index[key] = array("q", (held, seq))  # 8 bytes a seq from here on
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
    elif held is not None and seq in held:
        held.remove(seq)


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


def live_after(
    log: Sequence[StoredOp | None], start: int, limit: int, end: int | None = None
) -> tuple[list[StoredOp], bool]:
    """Up to ``limit`` rows of ``log[start:end]`` that are not purged, and
    whether any row follows them (before ``end``)."""
    stop = len(log) if end is None else min(end, len(log))
    out: list[StoredOp] = []
    i = start
    while i < stop and len(out) < limit:
        row = log[i]
        if row is not None:
            out.append(row)
        i += 1
    more = any(log[j] is not None for j in range(i, stop))
    return out, more
