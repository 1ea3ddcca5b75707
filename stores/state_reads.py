"""``read_state`` composed of the single-collection batch reads, for backends
where a round trip is cheap (in-process memory, embedded SQLite)."""

from __future__ import annotations

from stores.base import SequencingSession, StateQuery, StateRows, creator_of


async def read_state_stepwise(reads: SequencingSession, query: StateQuery) -> StateRows:
    rows = StateRows()
    rows.operations = await reads.get_operations(query.cids)
    followed = {op.chain_id for op in rows.operations.values() if op.kind == "content-op"}
    rows.chains = await reads.get_chains(query.chain_ids | followed)
    creators = {c for chain in rows.chains.values() if (c := creator_of(chain)) is not None}
    rows.chains.update(await reads.get_chains(creators - rows.chains.keys()))
    rows.identity_keys = await reads.get_identity_keys(query.key_dids | creators)
    rows.beacons = await reads.get_beacons(query.beacon_dids)
    rows.pairs = await reads.get_countersign_pairs(query.pairs)
    rows.rejections = await reads.get_rejections(query.token_hashes)
    if query.count_pending:
        rows.pending = await reads.count_pending()
    rows.buffered = await reads.get_buffered(query.buffered)
    if rows.buffered:  # a copy waits only beside a buffered op
        rows.copies = await reads.get_copy_hashes(rows.buffered.keys())
    rows.bans = await reads.get_bans(query.ban_dids)
    return rows
