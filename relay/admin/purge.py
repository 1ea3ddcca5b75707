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
and the blobs X created go too, and X's ops still in the raw buffer. Another
signer's token of such an op's payload, kept beside it as a copy, stays: it
takes the op's place (``keep_copies``).

``read_closure`` reads what goes; the relay removes it in bounded steps
(``relay.admin.purge_steps``), which take in what is sequenced between
them. The ban is stored before, so nothing of X can be sequenced after.

Not removed: other DIDs' identities, and their content chains' remaining
ops. Peers and feed followers that already hold the removed ops keep them
(a purge starts a new feed epoch, so followers bootstrap again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from relay.ingest.policy import signer_of_token
from stores.base import ChainRecord, OperationRecord, PendingOp, RawOpBuffer
from stores.moderation import ModerationBatch, ModerationStore

RAW_PAGE = 500


class PurgeStore(ModerationStore, RawOpBuffer, Protocol):
    async def get_chain(self, chain_id: str) -> ChainRecord | None: ...


@dataclass(slots=True)
class Closure:
    """What the purge of a DID removes, as read at one time: ``removed`` ops
    by CID, the ``doomed`` chains (deleted whole), the ``touched`` chains
    (doomed, or holding a removed op) and the ops of those chains."""

    removed: dict[str, OperationRecord]
    doomed: set[str]
    touched: set[str]
    chain_ops: list[OperationRecord]


async def read_closure(store: ModerationStore, did: str) -> Closure:
    signed = await store.operations_signed_by(did)
    removed: dict[str, OperationRecord] = {op.cid: op for op in signed}
    created = {op.chain_id for op in signed if op.kind == "content-op" and op.parent_cid is None}
    doomed = created | ({did} if any(op.kind == "identity-op" for op in signed) else set())
    touched = doomed | {op.chain_id for op in signed if op.kind == "content-op"}
    chain_ops = [o for o in await store.operations_in_chains(touched) if chain_op(o)]
    for op in chain_ops:  # seq order: a parent is decided before its children
        if op.chain_id in doomed or (op.parent_cid is not None and op.parent_cid in removed):
            removed[op.cid] = op
    await _countersignatures_of(store, removed)
    return Closure(removed, doomed, touched, chain_ops)


def chain_op(op: OperationRecord) -> bool:
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


def rewound_to(current: ChainRecord, head: OperationRecord) -> ChainRecord:
    """``current`` with ``head`` (what remains of it that the head rule picks) as its head."""
    state = head.state if head.state is not None else current.state
    return ChainRecord(
        current.chain_id, current.kind, current.genesis_cid, head.cid, head.created_at_ms, state
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
        found.update(p.cid for p in page if _meant(p, did, older_than_ms))
        if len(page) < RAW_PAGE:
            return found
        after = page[-1].cid


async def keep_copies(store: RawOpBuffer, batch: ModerationBatch, did: str | None) -> None:
    """Of the copies kept beside the CIDs ``batch`` drops from the buffer
    (other tokens of those ops' payloads), the ones another signer than
    ``did`` made stay, answered waiting as they were: the oldest takes its
    CID's op's place, the others wait beside it; ``did``'s go with their op.
    A drop by age alone takes a CID whole: an op's age is its CID's (how
    long its payload has waited), and its copies have waited as long."""
    if did is None:
        return
    survivors: dict[str, list[tuple[str, PendingOp]]] = {}
    gone: set[tuple[str, str]] = set()
    for token_hash, copy in await store.get_copies(batch.raw_cids):
        if signer_of_token(copy.cid, copy.jws_token) == did:
            gone.add((copy.cid, token_hash))
        else:
            survivors.setdefault(copy.cid, []).append((token_hash, copy))
    for cid, kept in survivors.items():
        token_hash, heir = min(kept, key=lambda item: (item[1].since_ms or 0, item[0]))
        batch.raw_cids.discard(cid)
        batch.raw_replaced[cid] = (token_hash, heir.jws_token)
        batch.raw_copies_gone.update(key for key in gone if key[0] == cid)


def _meant(pending: PendingOp, did: str | None, older_than_ms: int | None) -> bool:
    """A buffered op a drop of ``did``'s ops and/or of those first buffered at
    or before ``older_than_ms`` removes (both given: both hold)."""
    if did is not None and signer_of_token(pending.cid, pending.jws_token) != did:
        return False
    # ops buffered by a commit (they waited at once) carry only since_ms
    arrived = pending.received_at_ms or pending.since_ms or 0
    return older_than_ms is None or arrived <= older_than_ms
