"""A purge as one batch, the way it was applied before purges went in steps:
what the relay's stepped purge (``relay.admin.purge_steps``) must remove in
the end, computed independently of it (the chains' heads found by a scan of
what remains), and a whole purge for the tests of one moderation session."""

from __future__ import annotations

from collections.abc import Container, Iterable

from relay.admin.purge import (
    PurgeStore,
    buffered_by,
    keep_copies,
    read_closure,
    rewound_to,
)
from relay.rules.heads import head_key
from stores.base import ChainRecord, OperationRecord
from stores.moderation import ModerationBatch


async def plan_purge(store: PurgeStore, did: str, at_ms: int) -> ModerationBatch:
    """The whole purge as one batch, applied in one moderation session."""
    closure = await read_closure(store, did)
    removed, doomed, touched, chain_ops = (
        closure.removed, closure.doomed, closure.touched, closure.chain_ops
    )  # fmt: skip
    by_chain: dict[str, list[OperationRecord]] = {}
    for op in chain_ops:  # one pass: a scan of every chain's ops per rewound chain is quadratic
        by_chain.setdefault(op.chain_id, []).append(op)
    rewinds = [
        head
        for chain_id in sorted(touched - doomed)
        if (head := rewound(await store.get_chain(chain_id), by_chain.get(chain_id, []), removed))
        is not None
    ]
    batch = ModerationBatch(
        purged_did=did,
        at_ms=at_ms,
        operations=sorted(removed.values(), key=lambda o: (o.seq, o.cid)),
        chains_removed=doomed,
        chains_rewound=rewinds,
        dids_removed={did},
        raw_cids=await buffered_by(store, did),
    )
    await keep_copies(store, batch, did)
    return batch


def rewound(
    current: ChainRecord | None,
    chain_ops: Iterable[OperationRecord],
    removed: Container[str],
) -> ChainRecord | None:
    """``current`` after the purge, if its head changes (``chain_ops``: the chain's ops)."""
    if current is None or current.head_cid not in removed:
        return None
    remaining = [o for o in chain_ops if o.cid not in removed]
    if not remaining:
        return None
    return rewound_to(current, max(remaining, key=lambda o: head_key(o.created_at_ms, o.cid)))
