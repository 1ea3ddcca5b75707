"""Moderation and the audit snapshot of the in-memory store.

``MemoryAdmin`` is mixed into ``MemoryStore`` and works on its dicts. A
purge leaves ``None`` at the purged log positions (they are never reused)
and takes the ops out of every index. Like ``commit``, ``apply_moderation``
runs with no await in between, so it is atomic for every other coroutine;
the audit snapshot copies what it reports the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from stores.base import (
    BeaconRecord,
    ChainRecord,
    CountersignatureRecord,
    IdentityKeyRecord,
    OperationRecord,
    PendingOp,
)
from stores.epoch import new_epoch
from stores.memory_rows import drop_seq, drop_witness_token, witnesses_of
from stores.moderation import BanChanges, BanRecord, ModerationBatch, PurgedOperation

if TYPE_CHECKING:
    from stores.memory_rows import ChainSeqs, Interner, OpTable, Roots, StoredChain, Witnesses

_T = TypeVar("_T")


class MemoryAdmin:
    """The ``ModerationStore`` and ``AuditSource`` halves of ``MemoryStore``."""

    _lock: asyncio.Lock
    _ops: OpTable
    _interner: Interner
    _chains: dict[str, StoredChain]
    _keys: dict[str, tuple[IdentityKeyRecord, ...]]
    _beacons: dict[str, BeaconRecord]
    _countersigs: dict[str, Witnesses]
    _chain_log: dict[str, ChainSeqs]
    _standalone_log: dict[str, ChainSeqs]
    _roots: Roots
    _raw: dict[str, str]
    _received: dict[str, int]
    _pending: dict[str, PendingOp]
    _copies: dict[str, dict[str, PendingOp]]
    _blobs: dict[tuple[str, str], bytes]
    _epoch: str | None

    def __init__(self) -> None:
        self._bans: dict[str, BanRecord] = {}
        # each DID ever banned -> the mark of its last change, in mark order
        # (a change moves its DID to the end), so what changed since a mark
        # is read from the end
        self._ban_marks: dict[str, int] = {}
        self._ban_mark = 1  # as the SQL stores: 0 is the mark of a reader that read nothing
        self._purged: list[PurgedOperation] = []
        self._under_way: dict[str, int] = {}  # purged DID -> at_ms

    def _forget_buffered(self, cid: str) -> None:
        raise NotImplementedError

    def _drop_copy(self, cid: str, token_hash: str) -> None:
        raise NotImplementedError

    async def get_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        raise NotImplementedError  # MemoryStore's (a moderation session reads through it)

    async def get_chains(self, chain_ids: Collection[str]) -> dict[str, ChainRecord]:
        raise NotImplementedError

    # bans and purge records ----------------------------------------------------
    async def put_ban(self, ban: BanRecord) -> None:
        self._bans[ban.did] = ban
        self._ban_changed(ban.did)

    async def delete_ban(self, did: str) -> bool:
        if self._bans.pop(did, None) is None:
            return False
        self._ban_changed(did)
        return True

    def _ban_changed(self, did: str) -> None:
        self._ban_mark += 1
        self._ban_marks.pop(did, None)
        self._ban_marks[did] = self._ban_mark

    async def ban_changes(self, after: int) -> BanChanges:
        if self._ban_mark == after:
            return BanChanges(after)
        since = after if self._ban_mark > after else 0
        changes = BanChanges(self._ban_mark, whole=since == 0)
        for did in reversed(self._ban_marks):
            if self._ban_marks[did] <= since:
                break
            ban = self._bans.get(did)
            if ban is None:
                changes.lifted.append(did)
            else:
                changes.banned.append(ban)
        return changes

    async def list_bans(
        self, limit: int | None = None, after: str | None = None
    ) -> list[BanRecord]:
        dids = [did for did in sorted(self._bans) if after is None or did > after]
        return [self._bans[did] for did in dids[:limit]]

    async def count_purged(self, dids: Collection[str]) -> dict[str, dict[str, int]]:
        wanted = set(dids)
        counts: dict[str, dict[str, int]] = {}
        for p in self._purged:
            if p.purged_did in wanted:
                by_kind = counts.setdefault(p.purged_did, {})
                by_kind[p.kind] = by_kind.get(p.kind, 0) + 1
        return counts

    async def get_bans(self, dids: Collection[str]) -> dict[str, str]:
        """(the sequencing session's read, ``SequencingSession.get_bans``)"""
        return {did: ban.reason for did in dids if (ban := self._bans.get(did)) is not None}

    async def list_purged(self, did: str | None = None) -> list[PurgedOperation]:
        found = [p for p in self._purged if did is None or p.purged_did == did]
        return sorted(found, key=lambda p: (p.seq, p.cid))

    async def purges_under_way(self) -> dict[str, int]:
        return dict(sorted(self._under_way.items()))

    async def operations_signed_by(self, did: str) -> list[OperationRecord]:
        authors, record = self._ops.author, self._ops.record
        return [record(s) for s in self._ops.live() if authors[s - 1] == did]

    async def operations_in_chains(self, chain_ids: Collection[str]) -> list[OperationRecord]:
        wanted, chains, record = set(chain_ids), self._ops.chain, self._ops.record
        return [record(s) for s in self._ops.live() if chains[s - 1] in wanted]

    # the moderation session ----------------------------------------------------
    @asynccontextmanager
    async def moderating(self) -> AsyncIterator[MemoryAdmin]:
        async with self._lock:
            yield self

    async def apply_moderation(self, batch: ModerationBatch) -> int:
        # No await below: the whole batch applies atomically for other tasks.
        if batch.purge_under_way:
            self._under_way.setdefault(batch.purged_did, batch.at_ms)
        for did in batch.blob_creators:
            for key in [k for k in self._blobs if k[0] == did]:
                del self._blobs[key]
        for op in batch.operations:
            self._remove_op(op, batch)
        if batch.operations and not batch.keep_epoch:
            self._epoch = new_epoch()
        for chain_id in batch.chains_removed:
            self._chains.pop(chain_id, None)
        self._chains.update({c.chain_id: self._interner.chain(c) for c in batch.chains_rewound})
        self._drop_keys(batch.keys_removed)
        for did in batch.dids_removed:
            self._keys.pop(did, None)
            self._beacons.pop(did, None)
            for key in [k for k in self._blobs if k[0] == did]:
                del self._blobs[key]
        dropped = 0
        for cid in batch.raw_cids:
            dropped += cid in self._raw
            self._forget_buffered(cid)  # and its copies, as the SQL trigger does
        for cid, token_hash in batch.raw_copies_gone:
            self._drop_copy(cid, token_hash)
        for cid, (token_hash, token) in batch.raw_replaced.items():
            if cid in self._raw:
                dropped += 1
                self._raw[cid] = token
                pending = self._pending.get(cid)
                if pending is not None:
                    self._pending[cid] = replace(pending, jws_token=token)
                self._drop_copy(cid, token_hash)
        if batch.purge_done:
            self._under_way.pop(batch.purged_did, None)
        return dropped

    def _drop_keys(self, keys: Collection[IdentityKeyRecord]) -> None:
        gone: dict[str, set[IdentityKeyRecord]] = {}
        for key in keys:
            gone.setdefault(key.did, set()).add(key)
        for did, dropped in gone.items():
            held = list(self._keys.get(did, ()))
            while held and held[-1] in dropped:  # a purge drops the newest: no scan
                dropped.discard(held.pop())
            kept = tuple(k for k in held if k not in dropped) if dropped else tuple(held)
            if kept:
                self._keys[did] = kept
            else:
                self._keys.pop(did, None)

    def _remove_op(self, op: OperationRecord, batch: ModerationBatch) -> None:
        seq = self._ops.seq_of.get(op.cid)
        if seq is None:
            return
        stored = self._ops.record(seq)  # before its columns are cleared
        self._ops.remove(seq)
        chain_kind = stored.kind in ("identity-op", "content-op")
        drop_seq(
            self._chain_log if chain_kind else self._standalone_log, stored.chain_id, stored.seq
        )
        if stored.parent_cid is None:
            self._roots.discard(stored.created_at_ms, seq)
        if stored.kind == "countersign":  # its row, whoever it names (SQL: by CID)
            drop_witness_token(self._countersigs, stored.chain_id, stored.jws_token)
        beacon = self._beacons.get(stored.chain_id)
        if stored.kind == "beacon" and beacon is not None and beacon.cid == stored.cid:
            del self._beacons[stored.chain_id]
        record = PurgedOperation(
            stored.seq, stored.cid, stored.kind, stored.chain_id, stored.author_did,
            batch.purged_did, batch.at_ms,
        )  # fmt: skip
        self._purged.append(record)

    # the audit snapshot -------------------------------------------------------
    @asynccontextmanager
    async def audit_snapshot(self) -> AsyncIterator[_MemorySnapshot]:
        yield _MemorySnapshot(self)


async def _each(items: Sequence[_T]) -> AsyncIterator[_T]:
    for item in items:
        yield item


class _MemorySnapshot:
    """Copies of every table, taken at once (no await in ``__init__``)."""

    def __init__(self, store: MemoryAdmin) -> None:
        self._ops = [store._ops.record(seq) for seq in store._ops.live()]
        self._chains = [store._chains[c].record() for c in sorted(store._chains)]
        self._keys = [k for per_did in store._keys.values() for k in per_did]
        self._beacons = [store._beacons[d] for d in sorted(store._beacons)]
        by_token = {o.jws_token: o.cid for o in self._ops if o.kind == "countersign"}
        self._sigs = [
            CountersignatureRecord(target, witness, by_token.get(token, ""), token)
            for target in store._countersigs
            for witness, token in witnesses_of(store._countersigs, target).items()
        ]
        self._blobs = sorted(store._blobs)
        self._raw = [
            PendingOp(cid, token, _waits(store._pending.get(cid)), store._received.get(cid, 0))
            for cid, token in sorted(store._raw.items())
        ]
        self._copies = [
            (token_hash, copy)
            for cid in sorted(store._copies)
            for token_hash, copy in sorted(store._copies[cid].items())
        ]
        self._purged = sorted(store._purged, key=lambda p: (p.seq, p.cid))

    async def count_operations(self) -> int:
        return len(self._ops)

    def operations(self) -> AsyncIterator[OperationRecord]:
        return _each(self._ops)

    def chains(self) -> AsyncIterator[ChainRecord]:
        return _each(self._chains)

    def identity_keys(self) -> AsyncIterator[IdentityKeyRecord]:
        return _each(self._keys)

    def beacons(self) -> AsyncIterator[BeaconRecord]:
        return _each(self._beacons)

    def countersignatures(self) -> AsyncIterator[CountersignatureRecord]:
        return _each(self._sigs)

    def blob_keys(self) -> AsyncIterator[tuple[str, str]]:
        return _each(self._blobs)

    def raw_ops(self) -> AsyncIterator[PendingOp]:
        return _each(self._raw)

    def raw_copies(self) -> AsyncIterator[tuple[str, PendingOp]]:
        return _each(self._copies)

    async def purged(self) -> list[PurgedOperation]:
        return list(self._purged)


def _waits(pending: PendingOp | None) -> str:
    return pending.waits_for if pending is not None else ""
