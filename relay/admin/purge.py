"""The purge plan: which rows go when a banned DID's ops are purged.

Removed, for the purged DID X:
- every op X signed: its identity chain, its beacons, artifacts and
  countersignatures, and its content ops in anyone's chains;
- every content chain X created, whole (any signer's ops in it);
- in other chains, every op descending from a removed op (its parent link
  no longer leads to a genesis);
- every countersignature of a removed op, transitively.
Chains X created and X's identity chain are deleted; other chains that lost
ops are rewound to the head rule over what remains (highest createdAt, then
highest CID) with that op's state snapshot. X's identity keys, beacon row
and the blobs X created go too, and X's ops still in the raw buffer.

The plan is read from the store and applied in one moderation session, so
nothing is sequenced in between; the ban is stored before, so nothing of X
can be sequenced after either.

Not removed: other DIDs' identities, and their content chains' remaining
ops. Peers and feed followers that already hold the removed ops keep them
(a purge starts a new feed epoch, so followers bootstrap again).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from relay.ingest.policy import signer_of_token
from relay.rules.heads import head_key
from stores.base import ChainRecord, OperationRecord, RawOpBuffer
from stores.moderation import ModerationBatch, ModerationStore

RAW_PAGE = 500


class PurgeStore(ModerationStore, RawOpBuffer, Protocol):
    async def get_chain(self, chain_id: str) -> ChainRecord | None: ...


async def plan_purge(store: PurgeStore, did: str, at_ms: int) -> ModerationBatch:
    signed = await store.operations_signed_by(did)
    removed: dict[str, OperationRecord] = {op.cid: op for op in signed}
    created = {op.chain_id for op in signed if op.kind == "content-op" and op.parent_cid is None}
    doomed = created | ({did} if any(op.kind == "identity-op" for op in signed) else set())
    touched = doomed | {op.chain_id for op in signed if op.kind == "content-op"}
    chain_ops = [o for o in await store.operations_in_chains(touched) if _chain_op(o)]
    for op in chain_ops:  # seq order: a parent is decided before its children
        if op.chain_id in doomed or (op.parent_cid is not None and op.parent_cid in removed):
            removed[op.cid] = op
    await _countersignatures_of(store, removed)
    rewound = [
        head
        for chain_id in sorted(touched - doomed)
        if (head := await _rewound(store, chain_id, chain_ops, removed)) is not None
    ]
    return ModerationBatch(
        purged_did=did,
        at_ms=at_ms,
        operations=sorted(removed.values(), key=lambda o: (o.seq, o.cid)),
        chains_removed=doomed,
        chains_rewound=rewound,
        dids_removed={did},
        raw_cids=await buffered_by(store, did),
    )


def _chain_op(op: OperationRecord) -> bool:
    return op.kind in ("identity-op", "content-op")


async def _countersignatures_of(
    store: ModerationStore, removed: dict[str, OperationRecord]
) -> None:
    frontier = set(removed)
    while frontier:
        found = await store.operations_in_chains(frontier)
        fresh = [o for o in found if o.kind == "countersign" and o.cid not in removed]
        removed.update({o.cid: o for o in fresh})
        frontier = {o.cid for o in fresh}


async def _rewound(
    store: PurgeStore,
    chain_id: str,
    chain_ops: Iterable[OperationRecord],
    removed: dict[str, OperationRecord],
) -> ChainRecord | None:
    """The chain row after the purge, if its head changes."""
    current = await store.get_chain(chain_id)
    if current is None or current.head_cid not in removed:
        return None
    remaining = [o for o in chain_ops if o.chain_id == chain_id and o.cid not in removed]
    if not remaining:
        return None
    head = max(remaining, key=lambda o: head_key(o.created_at_ms, o.cid))
    state = head.state if head.state is not None else current.state
    return ChainRecord(
        chain_id, current.kind, current.genesis_cid, head.cid, head.created_at_ms, state
    )


async def buffered_by(
    store: RawOpBuffer, did: str | None, older_than_ms: int | None = None
) -> set[str]:
    """CIDs of buffered (unsequenced) ops signed by ``did`` and/or first
    buffered at or before ``older_than_ms``; both given: both must hold."""
    found: set[str] = set()
    after: str | None = None
    while True:
        page = await store.get_unsequenced(RAW_PAGE, after)
        for pending in page:
            if did is not None and signer_of_token(pending.cid, pending.jws_token) != did:
                continue
            # ops buffered by a commit (they waited at once) carry only since_ms
            arrived = pending.received_at_ms or pending.since_ms or 0
            if older_than_ms is not None and arrived > older_than_ms:
                continue
            found.add(pending.cid)
        if len(page) < RAW_PAGE:
            return found
        after = page[-1].cid
