"""A purge applied in bounded steps, with the sequencing lock let go between
them, so ingestion waits for one step (2000 ops by default), not for the
whole purge (``--purge-step-ops``).

The plan (``relay.admin.purge``) is read once, outside the lock. Each step,
under the lock, first takes in what was sequenced since the plan was read
(an op that hangs off a removed op, in a doomed chain, or signed by the
purged DID joins the plan), then removes the next ``step_ops`` ops in this
order:

1. every op but the DID's beacons and identity ops, highest seq first: an
   op's dependents (children, countersignatures) are sequenced after it, so
   what remains always hangs off ops that remain;
2. its beacons, oldest first: the beacon row keeps naming the newest;
3. its identity chain, highest seq first, each step dropping the key rows
   no identity op left holds; the last step takes its keys and beacon row.

It also drops at most ``step_ops`` of the DID's buffered ops (read outside
the lock). No step does more: the last one neither takes the rest of the identity
chain at once nor reads the whole buffer under the lock.

Every step is one transaction that leaves the store as ``verify-store``
wants it: a chain that lost its head is rewound to the head rule over what
remains (a doomed chain too, until its last op goes with its row; the next
head is kept ordered, not found by a scan per step), the DID's blobs go in
the first step. The first step records the purge as under
way and the last one clears it, so a crash in between leaves the steps done
(recorded as purged, as any purge) and the record: the next start finishes
it (``finish_purges``), planning again from what remains, which is exactly
the rest of the plan as each step removes a top slice of it.

Feed epochs: the first step and the last start a new one, the steps
between keep it. A follower is told when the purge starts (what it holds
may be going) and when it ends (what is left is final), two 410s and two
re-bootstraps, not one per step (a hundred for 200,000 ops). Between them
it may still hold ops that were removed, as between a purge's start and end
it would anyway; a purge cut short is finished (and its last epoch started)
at the next start.

One purge runs at a time per store: the ``purge`` lease across processes,
so two of them never step the same plan.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from sortedcontainers import SortedList

from relay.config import DEFAULT_PURGE_STEP_OPS
from relay.protocol import IdentityState
from relay.rules.heads import head_key
from stores.base import FeedEntry, IdentityKeyRecord, OperationRecord
from stores.leases import LeaseStore
from stores.moderation import ModerationBatch, ModerationSession

from .purge import PurgeStore, buffered_by, chain_op, keep_copies, read_closure, rewound_to

log = logging.getLogger("dfos_relay.admin")

CATCH_UP_PAGE = 500  # ops sequenced since the plan, read this many at a time
LEASE = "purge"
LEASE_POLL_S = 0.2


class SteppedPurgeStore(PurgeStore, LeaseStore, Protocol):
    async def log_length(self) -> int: ...
    async def read_seq_range(
        self, after_seq: int, until_seq: int, limit: int
    ) -> list[FeedEntry]: ...


class PurgeLeaseLost(Exception):
    """Another process holds the purge lease now; this one stopped stepping."""


@dataclass
class PurgeTotals:
    """What the steps of one purge did, added up."""

    operations: list[OperationRecord] = field(default_factory=list)
    chains_removed: set[str] = field(default_factory=set)
    chains_rewound: set[str] = field(default_factory=set)
    buffered_dropped: int = 0
    steps: int = 0


class _ChainOps:
    """A touched chain's ops not yet removed, and their head-rule order: a
    step that takes a chain's head finds the next one without a scan of what
    remains (a scan per step made a long chain's purge quadratic)."""

    __slots__ = ("_keys", "_order", "by_cid")

    def __init__(self) -> None:
        self.by_cid: dict[str, OperationRecord] = {}
        self._order: SortedList[tuple[int, str]] = SortedList()
        # an identity chain's: how many of the ops left hold each key
        self._keys: Counter[IdentityKeyRecord] = Counter()

    def add(self, op: OperationRecord) -> None:
        if op.cid not in self.by_cid:
            self.by_cid[op.cid] = op
            self._order.add(head_key(op.created_at_ms, op.cid))
            self._keys.update(_keys_of(op))

    def discard(self, cid: str) -> set[IdentityKeyRecord]:
        """Remove ``cid``; the keys no op left holds (an identity op's)."""
        op = self.by_cid.pop(cid, None)
        if op is None:
            return set()
        self._order.remove(head_key(op.created_at_ms, op.cid))
        unheld = set()
        for key in _keys_of(op):
            self._keys[key] -= 1
            if self._keys[key] <= 0:
                del self._keys[key]
                unheld.add(key)
        return unheld

    def head(self) -> OperationRecord | None:
        return self.by_cid[self._order[-1][1]] if self._order else None

    def __len__(self) -> int:
        return len(self.by_cid)


def _keys_of(op: OperationRecord) -> set[IdentityKeyRecord]:
    """The key rows of an identity op's state (each key of its chain's index)."""
    if op.kind != "identity-op" or op.state is None:
        return set()
    keys = IdentityState.from_record(op.state).all_keys()
    return {IdentityKeyRecord(op.chain_id, k.id, k.public_key_multibase) for k in keys}


@dataclass
class _Plan:
    did: str
    at_ms: int
    removed: dict[str, OperationRecord]
    doomed: set[str]
    touched: set[str]
    by_chain: dict[str, _ChainOps]  # touched chains' ops not yet removed
    seen_seq: int  # every op up to this position was looked at
    queue: list[OperationRecord] = field(default_factory=list)  # next to remove: last
    gone: set[str] = field(default_factory=set)
    raw: dict[str, None] = field(default_factory=dict)  # its buffered ops left to drop
    chains_gone: set[str] = field(default_factory=set)

    def order(self) -> None:
        self.queue = sorted(
            (op for cid, op in self.removed.items() if cid not in self.gone),
            key=self._key,
            reverse=True,
        )

    def next_chunk(self, step_ops: int) -> list[OperationRecord]:
        """The ops the next step removes: the last ``step_ops`` of the queue
        (the identity chain too: a step drops the key rows no op left holds)."""
        return self.queue[-step_ops:]

    def next_raw(self, step_ops: int) -> list[str]:
        """The buffered ops the next step drops."""
        return list(itertools.islice(self.raw, step_ops))

    def _key(self, op: OperationRecord) -> tuple[int, int, str]:
        if op.chain_id == self.did and op.kind == "identity-op":
            return (2, -op.seq, op.cid)
        if op.chain_id == self.did and op.kind == "beacon":
            return (1, op.created_at_ms, op.cid)
        return (0, -op.seq, op.cid)

    def take(self, op: OperationRecord) -> bool:
        """Whether ``op``, sequenced after the plan was read, joins it (seq order)."""
        if op.cid in self.removed:
            return False
        if chain_op(op) and op.chain_id in self.touched:
            self.by_chain.setdefault(op.chain_id, _ChainOps()).add(op)
        mine = op.author_did == self.did
        if chain_op(op) and mine and op.chain_id not in self.touched:
            return True  # a chain the plan never read: the caller reads it (rare)
        parent = op.parent_cid
        hangs = chain_op(op) and (
            op.chain_id in self.doomed or (parent is not None and parent in self.removed)
        )
        signs = op.kind == "countersign" and op.chain_id in self.removed
        if mine or hangs or signs:
            self.removed[op.cid] = op
        return False


async def purge_in_steps(
    store: SteppedPurgeStore,
    did: str,
    at_ms: int,
    after_step: Callable[[bool], Awaitable[None]],
    step_ops: int = DEFAULT_PURGE_STEP_OPS,
    left_under_way: bool = False,
) -> PurgeTotals:
    """Purge ``did`` step by step (holding the ``purge`` lease); ``after_step``
    runs after each step once ops were removed (the feed is told of the
    epoch), told whether it was the last. ``left_under_way``: only if it is
    still recorded under way once the lease is taken (another process
    starting at the same time may have finished it)."""
    lease = await store.lease(LEASE)
    while not await lease.held():
        await asyncio.sleep(LEASE_POLL_S)
    try:
        totals = PurgeTotals()
        if left_under_way and did not in await store.purges_under_way():
            return totals
        plan = await _read_plan(store, did, at_ms)
        while True:
            if not await lease.held():
                steps = totals.steps
                raise PurgeLeaseLost(f"the purge of {did} lost its lease after {steps} steps")
            done = await _step(store, plan, totals, step_ops)
            if totals.operations:
                await after_step(done)
            if done:
                return totals
            await asyncio.sleep(0)  # let the ingestion that waited for this step take the lock
    finally:
        await lease.release()


async def finish_purges(
    store: SteppedPurgeStore,
    after_step: Callable[[bool], Awaitable[None]],
    step_ops: int = DEFAULT_PURGE_STEP_OPS,
) -> list[str]:
    """Finish every purge a crash left under way; the DIDs finished."""
    finished = []
    for did, at_ms in (await store.purges_under_way()).items():
        totals = await purge_in_steps(store, did, at_ms, after_step, step_ops, True)
        log.info("finished the purge of %s left under way (%d ops)", did, len(totals.operations))
        finished.append(did)
    return finished


async def _read_plan(store: SteppedPurgeStore, did: str, at_ms: int) -> _Plan:
    async with store.moderating() as session:  # a session begun before the ban has ended
        await session.apply_moderation(ModerationBatch())
    seen = await store.log_length()  # before the reads: later ops are taken in by the steps
    closure = await read_closure(store, did)
    by_chain: dict[str, _ChainOps] = {}
    for op in closure.chain_ops:
        by_chain.setdefault(op.chain_id, _ChainOps()).add(op)
    plan = _Plan(did, at_ms, closure.removed, closure.doomed, closure.touched, by_chain, seen)
    plan.order()
    await _read_buffered(store, plan)
    return plan


async def _catch_up(store: SteppedPurgeStore, session: ModerationSession, plan: _Plan) -> None:
    """Take in what was sequenced since the plan was read (under the lock)."""
    head, before = await store.log_length(), len(plan.removed)
    while plan.seen_seq < head:
        entries = await store.read_seq_range(plan.seen_seq, head, CATCH_UP_PAGE)
        if not entries:
            break
        plan.seen_seq = entries[-1].seq
        wanted = [e.cid for e in entries if _may_join(plan, e)]
        records = await session.get_operations(wanted)
        for cid in wanted:
            op = records.get(cid)
            if op is not None and plan.take(op):
                await _take_chain(store, plan, op.chain_id)
    plan.seen_seq = max(plan.seen_seq, head)
    if len(plan.removed) != before:
        plan.order()


def _may_join(plan: _Plan, entry: FeedEntry) -> bool:
    return (
        entry.author_did == plan.did
        or entry.chain_id in plan.touched
        or entry.chain_id in plan.removed
    )


async def _take_chain(store: SteppedPurgeStore, plan: _Plan, chain_id: str) -> None:
    """A chain of the purged DID's that the plan never read (made after it)."""
    plan.touched.add(chain_id)
    ops = [o for o in await store.operations_in_chains([chain_id]) if chain_op(o)]
    plan.by_chain[chain_id] = chain = _ChainOps()
    for op in ops:
        chain.add(op)
    for op in ops:
        created = op.parent_cid is None and op.author_did == plan.did and op.kind == "content-op"
        if created:
            plan.doomed.add(chain_id)
        plan.take(op)


async def _step(store: SteppedPurgeStore, plan: _Plan, totals: PurgeTotals, step_ops: int) -> bool:
    """One locked step; True when it was the last."""
    scanned = len(plan.queue) <= step_ops and len(plan.raw) <= step_ops
    if scanned:  # it may be the last: the buffer is read before the lock, not under it
        await _read_buffered(store, plan)
    async with store.moderating() as session:
        await _catch_up(store, session, plan)
        chunk, raw = plan.next_chunk(step_ops), plan.next_raw(step_ops)
        last = scanned and len(chunk) == len(plan.queue) and len(raw) == len(plan.raw)
        batch = ModerationBatch(plan.did, plan.at_ms, operations=chunk, raw_cids=set(raw))
        batch.purge_under_way = totals.steps == 0
        batch.keep_epoch = totals.steps > 0 and not last and bool(totals.operations)
        batch.blob_creators = {plan.did} if totals.steps == 0 else set()
        leaving = {op.cid for op in chunk}
        await _rewind(session, plan, batch, leaving)
        await keep_copies(store, batch, plan.did)
        if last:
            batch.dids_removed = {plan.did}
            left = {c for c in plan.doomed if not plan.by_chain.get(c)} - plan.chains_gone
            batch.chains_removed |= left
            batch.purge_done = True
        totals.buffered_dropped += await session.apply_moderation(batch)
    del plan.queue[len(plan.queue) - len(chunk) :]
    for cid in raw:
        del plan.raw[cid]
    plan.gone |= leaving
    plan.chains_gone |= batch.chains_removed
    totals.operations += chunk
    totals.chains_removed |= batch.chains_removed
    totals.chains_rewound |= {c.chain_id for c in batch.chains_rewound}
    totals.chains_rewound -= totals.chains_removed
    totals.steps += 1
    return last


async def _read_buffered(store: SteppedPurgeStore, plan: _Plan) -> None:
    """The DID's buffered ops, read outside the lock (a read of the whole
    buffer): none is buffered once its ban is stored and every sequencing
    session begun before has ended (they read the bans under the lock); a
    step drops at most ``step_ops`` of them."""
    for cid in sorted(await buffered_by(store, plan.did)):
        plan.raw.setdefault(cid, None)


async def _rewind(
    session: ModerationSession, plan: _Plan, batch: ModerationBatch, leaving: set[str]
) -> None:
    """Chains whose head leaves in this step: rewound to what remains, or,
    when nothing remains of a doomed chain, removed."""
    chain_ids = {op.chain_id for op in batch.operations if chain_op(op)}
    for op in batch.operations:
        if (ops := plan.by_chain.get(op.chain_id)) is not None:
            batch.keys_removed |= ops.discard(op.cid)
    current = await session.get_chains(chain_ids)
    for chain_id in sorted(chain_ids):
        ops = plan.by_chain.get(chain_id)
        if not ops and chain_id in plan.doomed:
            batch.chains_removed.add(chain_id)
            continue
        chain, head = current.get(chain_id), ops.head() if ops else None
        gone = chain is not None and (chain.head_cid in leaving or chain.head_cid in plan.gone)
        if chain is not None and head is not None and gone:
            batch.chains_rewound.append(rewound_to(chain, head))
