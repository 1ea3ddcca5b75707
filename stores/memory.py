"""In-memory store: the reference backend for development and tests.

Everything lives in dicts; nothing survives the process. Sessions are
serialized by one asyncio lock, and ``commit`` applies a batch with no await
in between, so it is atomic with respect to every other coroutine. The log
is a list indexed by seq - 1; a purged position holds ``None`` (positions
are never reused). Moderation and the audit snapshot are in
``stores.memory_admin``.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

from stores.base import (
    DEPENDENCY_KINDS,
    BeaconRecord,
    ChainRecord,
    CommitBatch,
    FeedEntry,
    IdentityKeyRecord,
    LogPage,
    OperationKind,
    OperationRecord,
    OpLocation,
    PendingOp,
    PendingSummary,
    Rejection,
    RejectionNote,
    RelayIdentityRecord,
    StateQuery,
    StateRows,
    UnknownCursorError,
    dependency_kind,
    waits_for_op,
)
from stores.epoch import new_epoch
from stores.leases import Lease, ProcessLeases
from stores.memory_admin import MemoryAdmin
from stores.memory_forks import MemoryForks
from stores.memory_links import MemoryLinks
from stores.memory_rows import (
    KINDS,
    ChainSeqs,
    Interner,
    OpTable,
    Roots,
    StoredChain,
    Witnesses,
    add_key,
    add_seq,
    add_witness,
    seqs_of,
    witnesses_of,
)
from stores.paging import page_after
from stores.state_reads import read_state_stepwise

CHAIN_KINDS = frozenset({"identity-op", "content-op"})


class MemoryStore(MemoryAdmin, MemoryLinks, MemoryForks):
    """A ``RelayStore`` held in process memory."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._leases = ProcessLeases()
        self._ops = OpTable()  # see stores.memory_rows; a seq is its position + 1
        self._interner = Interner(self._ops)
        self._chains: dict[str, StoredChain] = {}
        # per DID, its keys in the order first seen (``add_key``)
        self._keys: dict[str, tuple[IdentityKeyRecord, ...]] = {}
        self._beacons: dict[str, BeaconRecord] = {}
        self._countersigs: dict[str, Witnesses] = {}  # by target CID
        self._chain_log: dict[str, ChainSeqs] = {}
        self._rejections: dict[str, Rejection] = {}
        self._raw: dict[str, str] = {}
        self._received: dict[str, int] = {}
        self._pending: dict[str, PendingOp] = {}
        self._waiters: dict[str, set[str]] = defaultdict(set)
        self._copies: dict[str, dict[str, PendingOp]] = {}  # CID -> token hash -> copy
        self._taken_copies: set[tuple[str, str]] = set()
        # CIDs taken by the current sequencing session (the index is left as
        # is, so a session that fails takes nothing away from the next one)
        self._taken: set[str] = set()
        self._blobs: dict[tuple[str, str], bytes] = {}
        self._cursors: dict[str, str] = {}
        self._identity: RelayIdentityRecord | None = None
        # changes feed: parentless ops by (createdAt, CID); standalone ops by chain
        self._roots = Roots(self._ops)
        self._standalone_log: dict[str, ChainSeqs] = {}
        self._epoch: str | None = None
        self._notes: OrderedDict[str, RejectionNote] = OrderedDict()  # oldest first
        MemoryAdmin.__init__(self)
        MemoryLinks.__init__(self)

    # lifecycle -------------------------------------------------------------
    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def ping(self) -> None:
        return None

    async def lease(self, name: str) -> Lease:
        return self._leases.lease(name)

    # proof reader ----------------------------------------------------------
    async def get_operation(self, cid: str) -> OperationRecord | None:
        seq = self._ops.seq_of.get(cid)
        return None if seq is None else self._ops.record(seq)

    async def get_chain(self, chain_id: str) -> ChainRecord | None:
        row = self._chains.get(chain_id)
        return None if row is None else row.record()

    async def get_beacon(self, did: str) -> BeaconRecord | None:
        return self._beacons.get(did)

    async def get_countersignatures(self, target_cid: str) -> list[str]:
        return list(witnesses_of(self._countersigs, target_cid).values())

    async def read_log(self, after: str | None, limit: int) -> LogPage:
        start = 0
        if after is not None:
            seq = self._ops.seq_of.get(after)
            if seq is None:
                raise UnknownCursorError(after)
            start = seq
        seqs, has_more = self._ops.live_after(start, limit)
        entry = self._ops.log_entry
        return page_after([entry(s) for s in seqs], limit, has_more=has_more)

    async def read_chain_log(self, chain_id: str, after: str | None, limit: int) -> LogPage:
        seqs = seqs_of(self._chain_log, chain_id)
        start = 0
        if after is not None:
            seq = self._ops.seq_of.get(after)
            if seq is None or self._ops.chain[seq - 1] != chain_id:
                raise UnknownCursorError(after)
            start = bisect.bisect_right(seqs, seq)
        window = seqs[start : start + limit]
        cids, entry = self._ops.cid, self._ops.log_entry
        entries = [entry(s) for s in window if cids[s - 1] is not None]
        return page_after(entries, limit, has_more=start + limit < len(seqs))

    async def log_length(self) -> int:
        return len(self._ops)

    # sequencing ------------------------------------------------------------
    @asynccontextmanager
    async def sequencing(self) -> AsyncIterator[MemoryStore]:
        async with self._lock:
            self._taken = set()
            self._taken_copies = set()
            yield self

    async def read_state(self, query: StateQuery) -> StateRows:
        return await read_state_stepwise(self, query)

    async def get_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        seq_of, record = self._ops.seq_of, self._ops.record
        return {c: record(seq) for c in cids if (seq := seq_of.get(c)) is not None}

    async def get_chains(self, chain_ids: Collection[str]) -> dict[str, ChainRecord]:
        return {c: row.record() for c in chain_ids if (row := self._chains.get(c)) is not None}

    async def get_identity_keys(self, dids: Collection[str]) -> dict[str, list[IdentityKeyRecord]]:
        return {d: list(self._keys[d]) for d in dids if d in self._keys}

    async def sequenced_and_keys(
        self, cids: Collection[str], dids: Collection[str]
    ) -> tuple[set[str], dict[str, list[IdentityKeyRecord]]]:
        seq_of = self._ops.seq_of
        return {c for c in cids if c in seq_of}, await self.get_identity_keys(dids)

    async def get_beacons(self, dids: Collection[str]) -> dict[str, BeaconRecord]:
        return {d: self._beacons[d] for d in dids if d in self._beacons}

    async def get_countersign_pairs(
        self, pairs: Collection[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        return {(t, w) for t, w in pairs if w in witnesses_of(self._countersigs, t)}

    async def get_rejections(self, token_hashes: Collection[str]) -> dict[str, Rejection]:
        return {h: self._rejections[h] for h in token_hashes if h in self._rejections}

    async def take_waiting(self, keys: Collection[str]) -> list[PendingOp]:
        found: list[PendingOp] = []
        frontier = list(keys)
        while frontier:
            for cid in self._waiters.get(frontier.pop(), ()):
                op = self._pending.get(cid)
                if op is not None and cid not in self._taken:
                    self._taken.add(cid)
                    found.append(op)
                    frontier.append(waits_for_op(cid))
        return found

    async def get_buffered(self, cids: Collection[str]) -> dict[str, str]:
        return {c: self._raw[c] for c in cids if c in self._raw}

    async def take_copies(self, cids: Collection[str]) -> list[tuple[str, PendingOp]]:
        taken: list[tuple[str, PendingOp]] = []
        for cid in cids:
            for token_hash, copy in self._copies.get(cid, {}).items():
                if (cid, token_hash) not in self._taken_copies:
                    self._taken_copies.add((cid, token_hash))
                    taken.append((token_hash, copy))
        return taken

    async def get_copies(self, cids: Collection[str]) -> list[tuple[str, PendingOp]]:
        return [(h, copy) for c in cids for h, copy in self._copies.get(c, {}).items()]

    async def get_copy_hashes(self, cids: Collection[str]) -> dict[str, set[str]]:
        return {c: set(copies) for c in cids if (copies := self._copies.get(c))}

    async def count_pending(self) -> int:
        return len(self._pending) + self._copy_count()

    def _copy_count(self) -> int:
        return sum(map(len, self._copies.values()))

    async def commit(self, batch: CommitBatch) -> int:
        # No await below: the whole batch applies atomically for other tasks.
        names, ops = self._interner, self._ops
        for op in batch.operations:
            chain_id = names.name(op.chain_id)
            seq = ops.append(
                op.cid, op.jws_token, op.kind, chain_id, names.name(op.author_did),
                names.cid(op.parent_cid), op.created_at_ms,
            )  # fmt: skip
            ops.state[seq - 1] = names.pack_state(op.state)  # after: its own CID is the op's
            chain_log = self._chain_log if op.kind in CHAIN_KINDS else self._standalone_log
            add_seq(chain_log, chain_id, seq)
            if op.parent_cid is None:
                self._roots.add(op.created_at_ms, seq)
        for chain in batch.chains.values():
            stored = names.chain(chain)
            self._chains[stored.chain_id] = stored
        for key in batch.identity_keys:
            add_key(self._keys, key)
        self._beacons.update(batch.beacons)
        for cs in batch.countersignatures:
            target, witness = names.name(cs.target_cid), names.name(cs.witness_did)
            add_witness(self._countersigs, target, witness, cs.jws_token)
        for rej in batch.rejections:
            self._rejections[rej.token_hash] = rej
        for cid in batch.resolved_cids - batch.waiting.keys():
            self._forget_buffered(cid)
        for cid, pending in batch.waiting.items():
            buffered = self._raw.get(cid)
            if buffered is not None and buffered != pending.jws_token and not pending.replaces:
                continue  # see PendingOp.replaces
            old = self._drop_pending(cid)
            if _starts_waiting_for_policy(old, pending):  # as the durable stores
                pending = replace(pending, replaces=False)
            elif old is not None and old.since_ms is not None:  # keeps waiting since then
                pending = replace(pending, since_ms=old.since_ms, replaces=False)
            elif pending.replaces:  # not kept, as by the durable stores
                pending = replace(pending, replaces=False)
            self._raw[cid] = pending.jws_token
            self._pending[cid] = pending
            self._waiters[pending.waits_for].add(cid)
        for cid, token_hash in batch.copies_gone:
            self._drop_copy(cid, token_hash)
        for (cid, token_hash), copy in batch.kept_copies().items():
            self._copies.setdefault(cid, {}).setdefault(token_hash, copy)
        return len(ops)

    def _drop_copy(self, cid: str, token_hash: str) -> None:
        copies = self._copies.get(cid)
        if copies is not None and copies.pop(token_hash, None) is not None and not copies:
            del self._copies[cid]

    def _forget_buffered(self, cid: str) -> None:
        """The op buffered under ``cid`` leaves, and its copies with it."""
        self._raw.pop(cid, None)
        self._received.pop(cid, None)
        self._drop_pending(cid)
        self._copies.pop(cid, None)

    def _drop_pending(self, cid: str) -> PendingOp | None:
        old = self._pending.pop(cid, None)
        if old is not None and (waiters := self._waiters.get(old.waits_for)) is not None:
            waiters.discard(cid)
            if not waiters:
                del self._waiters[old.waits_for]
        return old

    # changes feed ------------------------------------------------------------
    # reconciliation ----------------------------------------------------------
    async def read_sync_items(self, after_seq: int, limit: int) -> list[tuple[int, int, str]]:
        window, _ = self._ops.live_after(max(after_seq, 0), limit)  # purged ops: skipped
        created, cids = self._ops.created, self._ops.cid
        return [(s, created[s - 1], c) for s in window if (c := cids[s - 1]) is not None]

    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        return await self.get_operations(cids)

    async def read_seq_range(self, after_seq: int, until_seq: int, limit: int) -> list[FeedEntry]:
        # positions of purged ops hold None: skip them, still up to ``limit`` entries
        window, _ = self._ops.live_after(max(after_seq, 0), limit, end=max(until_seq, 0))
        return [self._ops.feed_entry(s) for s in window]

    async def read_roots(
        self, until_seq: int, after: tuple[int, str] | None, limit: int
    ) -> list[FeedEntry]:
        out: list[FeedEntry] = []
        for seq in self._roots.after(after):
            if len(out) == limit:
                break
            if seq <= until_seq:
                out.append(self._ops.feed_entry(seq))
        return out

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        chain = seqs_of(self._chain_log, chain_id)
        seqs = sorted([*chain, *seqs_of(self._standalone_log, chain_id)])
        cids, entry = self._ops.cid, self._ops.feed_entry
        entries = (entry(s) for s in seqs if s <= until_seq and cids[s - 1] is not None)
        return [e for e in entries if e.kind in kinds]

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        cids, codes, entry = self._ops.cid, self._ops.kind, self._ops.feed_entry
        wanted = {KINDS.index(kind) for kind in kinds}
        out: list[FeedEntry] = []
        for chain_id in set(chain_ids):
            for log in (self._chain_log, self._standalone_log):
                held = seqs_of(log, chain_id)  # ascending: the page starts at a bisection
                taken = 0
                for at in range(bisect.bisect_right(held, after_seq), len(held)):
                    seq = held[at]
                    if seq > until_seq or taken == limit:
                        break
                    # the kind by its code: no entry built for an op of another kind
                    if cids[seq - 1] is not None and codes[seq - 1] in wanted:
                        out.append(entry(seq))
                        taken += 1
        out.sort(key=lambda e: e.seq)
        return out[:limit]

    async def get_feed_epoch(self) -> str:
        if self._epoch is None:
            self._epoch = new_epoch()
        return self._epoch

    async def watch_commits(
        self, on_head: Callable[[int], None], on_listening: Callable[[bool], None]
    ) -> Callable[[], Awaitable[None]] | None:
        return None  # one process: the ingestor's listener wakes the feed

    def watch_epoch(self, on_doubt: Callable[[], None]) -> None:
        return None  # only this process resets it, and its feed hears of that

    async def reset_feed_epoch(self) -> str:
        self._epoch = new_epoch()
        return self._epoch

    # raw buffer ------------------------------------------------------------
    async def put_raw_ops(
        self, ops: Sequence[tuple[str, str]], received_at_ms: int = 0
    ) -> set[str]:
        sequenced = set()
        for cid, token in ops:
            if cid in self._ops.seq_of:
                sequenced.add(cid)
            elif cid not in self._raw:
                self._raw[cid] = token
                self._received[cid] = received_at_ms
        return sequenced

    async def get_unsequenced(self, limit: int, after_cid: str | None = None) -> list[PendingOp]:
        cids = sorted(self._raw)
        if after_cid is not None:
            cids = [c for c in cids if c > after_cid]
        out = []
        for cid in cids[:limit]:
            pending = self._pending.get(cid) or PendingOp(cid, self._raw[cid], "")
            out.append(replace(pending, received_at_ms=self._received.get(cid, 0)))
        return out

    async def count_unsequenced(self) -> int:
        return len(self._raw)

    async def get_waiting_for_policy(
        self, limit: int, after_cid: str | None = None
    ) -> list[PendingOp]:
        kept = sorted(
            c for c, op in self._pending.items()
            if op.waits_for.startswith("policy:") and (after_cid is None or c > after_cid)
        )  # fmt: skip
        return [self._pending[c] for c in kept[:limit]]

    # op status -------------------------------------------------------------
    async def locate_operations(self, cids: Collection[str]) -> dict[str, OpLocation]:
        ops = self._ops
        found = (s for c in cids if (s := ops.seq_of.get(c)) is not None)
        return {
            c: OpLocation(c, ops.kind_at(s), ops.chain[s - 1], s)
            for s in found
            if (c := ops.cid[s - 1]) is not None
        }

    async def find_buffered(self, cids: Collection[str]) -> dict[str, PendingOp]:
        found = (c for c in cids if c in self._raw)
        return {c: self._pending.get(c) or PendingOp(c, self._raw[c], "") for c in found}

    async def get_rejection_notes(self, cids: Collection[str]) -> dict[str, RejectionNote]:
        return {c: self._notes[c] for c in cids if c in self._notes}

    async def record_rejection_notes(self, notes: Sequence[RejectionNote], keep: int) -> None:
        for note in notes:
            self._notes.pop(note.cid, None)
            self._notes[note.cid] = note  # now the most recent
        while len(self._notes) > max(keep, 0):
            self._notes.popitem(last=False)

    async def pending_summary(self, cutoffs_ms: Sequence[int]) -> PendingSummary:
        waiting = {kind: 0 for kind in DEPENDENCY_KINDS}
        older = {kind: [0] * len(cutoffs_ms) for kind in DEPENDENCY_KINDS}
        oldest: PendingOp | None = None
        for op in self._pending.values():
            kind = dependency_kind(op.waits_for)
            waiting[kind] += 1
            if op.since_ms is None:
                continue
            for i, cutoff in enumerate(cutoffs_ms):
                older[kind][i] += op.since_ms <= cutoff
            if oldest is None or (op.since_ms, op.cid) < (oldest.since_ms or 0, oldest.cid):
                oldest = op
        unverified = len(self._raw) - len(self._pending)
        return PendingSummary(waiting, older, unverified, oldest, self._copy_count())

    # blobs -----------------------------------------------------------------
    async def get_blob(self, creator_did: str, document_cid: str) -> bytes | None:
        return self._blobs.get((creator_did, document_cid))

    async def put_blob(self, creator_did: str, document_cid: str, data: bytes) -> None:
        self._blobs.setdefault((creator_did, document_cid), bytes(data))

    # peer cursors ----------------------------------------------------------
    async def get_peer_cursor(self, peer_url: str) -> str | None:
        return self._cursors.get(peer_url)

    async def set_peer_cursor(self, peer_url: str, cursor: str) -> None:
        self._cursors[peer_url] = cursor

    async def list_peer_cursors(self) -> dict[str, str]:
        return dict(sorted(self._cursors.items()))

    # relay identity --------------------------------------------------------
    async def get_relay_identity(self) -> RelayIdentityRecord | None:
        return self._identity

    async def put_relay_identity(self, identity: RelayIdentityRecord) -> None:
        if self._identity is None:
            self._identity = identity


def _starts_waiting_for_policy(old: PendingOp | None, new: PendingOp) -> bool:
    """``new`` is kept through a write-policy error, and was not before: it
    starts waiting anew, for the policy (see ``PendingOp.since_ms``)."""
    policy = dependency_kind(new.waits_for) == "policy"
    return policy and (old is None or dependency_kind(old.waits_for) != "policy")
