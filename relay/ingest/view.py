"""The working state of one sequencing session.

Verification is synchronous; the store is async and may be remote. So each
round of ingestion first *prefetches* in a few batched queries everything the
round's ops can touch (their CIDs, parents, targets, chains, keys, beacons),
then verifies op by op against this view. Accepted ops are staged into the
view (so later ops of the batch see them) and into one ``CommitBatch``
written atomically at the end of the session.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from relay.protocol import KeyNotFoundError, decode_multikey, split_kid
from stores.base import (
    BeaconRecord,
    ChainRecord,
    CommitBatch,
    IdentityKeyRecord,
    OperationRecord,
    Rejection,
    SequencingSession,
)


@dataclass(slots=True)
class Needs:
    """What a round of ops may read, gathered before verification."""

    cids: set[str] = field(default_factory=set)
    dids: set[str] = field(default_factory=set)
    beacon_dids: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    token_hashes: set[str] = field(default_factory=set)


class StateView:
    def __init__(self, session: SequencingSession) -> None:
        self.session = session
        self.batch = CommitBatch()
        self._ops: dict[str, OperationRecord | None] = {}
        self._chains: dict[str, ChainRecord | None] = {}
        self._keys: dict[str, dict[str, list[bytes]]] = {}
        self._beacons: dict[str, BeaconRecord | None] = {}
        self._pairs: dict[tuple[str, str], bool] = {}
        self._rejections: dict[str, Rejection | None] = {}

    # prefetch ---------------------------------------------------------------
    async def prefetch(self, needs: Needs) -> None:
        ops = await self._load_ops(needs.cids)
        content_chains = {op.chain_id for op in ops if op.kind == "content-op"}
        await self._load_chains(needs.dids | content_chains)
        creators = {
            str(chain.state["creator_did"])
            for cid in content_chains
            if (chain := self._chains.get(cid)) is not None
        }
        await self._load_chains(creators)
        await self._load_keys(needs.dids | creators)
        await self._load_beacons(needs.beacon_dids)
        await self._load_pairs(needs.pairs)
        await self._load_rejections(needs.token_hashes)

    async def _load_ops(self, cids: set[str]) -> list[OperationRecord]:
        missing = [c for c in cids if c not in self._ops]
        if missing:
            found = await self.session.get_operations(missing)
            for cid in missing:
                self._ops[cid] = found.get(cid)
        return [op for c in cids if (op := self._ops.get(c)) is not None]

    async def _load_chains(self, ids: Iterable[str]) -> None:
        missing = [i for i in ids if i not in self._chains]
        if missing:
            found = await self.session.get_chains(missing)
            for chain_id in missing:
                self._chains[chain_id] = found.get(chain_id)

    async def _load_keys(self, dids: Iterable[str]) -> None:
        missing = [d for d in dids if d not in self._keys]
        if missing:
            found = await self.session.get_identity_keys(missing)
            for did in missing:
                self._keys[did] = {}
                for rec in found.get(did, ()):
                    self._add_key(rec)

    async def _load_beacons(self, dids: set[str]) -> None:
        missing = [d for d in dids if d not in self._beacons]
        if missing:
            found = await self.session.get_beacons(missing)
            for did in missing:
                self._beacons[did] = found.get(did)

    async def _load_pairs(self, pairs: set[tuple[str, str]]) -> None:
        missing = [p for p in pairs if p not in self._pairs]
        if missing:
            found = await self.session.get_countersign_pairs(missing)
            for pair in missing:
                self._pairs[pair] = pair in found

    async def _load_rejections(self, hashes: set[str]) -> None:
        missing = [h for h in hashes if h not in self._rejections]
        if missing:
            found = await self.session.get_rejections(missing)
            for token_hash in missing:
                self._rejections[token_hash] = found.get(token_hash)

    # reads -------------------------------------------------------------------
    def operation(self, cid: str) -> OperationRecord | None:
        return self._ops.get(cid)

    def chain(self, chain_id: str) -> ChainRecord | None:
        return self._chains.get(chain_id)

    def beacon(self, did: str) -> BeaconRecord | None:
        return self._beacons.get(did)

    def has_countersign(self, target_cid: str, witness_did: str) -> bool:
        return self._pairs.get((target_cid, witness_did), False)

    def rejection(self, token_hash: str) -> Rejection | None:
        return self._rejections.get(token_hash)

    def is_deleted_identity(self, did: str) -> bool:
        chain = self._chains.get(did)
        return chain is not None and bool(chain.state.get("deleted"))

    def resolve_key(self, kid: str) -> list[bytes]:
        """Historical resolver: any key the identity ever held, in any role.

        Using the whole history (not just the head) keeps ingestion
        order-independent: an op signed before a rotation verifies the same
        whether it arrives before or after the rotation.
        """
        did, key_id = split_kid(kid)
        if did is None:
            raise KeyNotFoundError(f"kid {kid!r} is not a DID URL", did=None)
        keys = self._keys.get(did, {}).get(key_id)
        if not keys:
            raise KeyNotFoundError(f"key {kid} is not known", did=did)
        return keys

    # staging -----------------------------------------------------------------
    def stage_operation(self, op: OperationRecord) -> None:
        self._ops[op.cid] = op
        self.batch.operations.append(op)
        self.batch.resolved_cids.add(op.cid)

    def stage_chain(self, chain: ChainRecord) -> None:
        self._chains[chain.chain_id] = chain
        self.batch.chains[chain.chain_id] = chain

    def stage_keys(self, records: Iterable[IdentityKeyRecord]) -> None:
        for rec in records:
            if self._add_key(rec):
                self.batch.identity_keys.append(rec)

    def stage_beacon(self, beacon: BeaconRecord) -> None:
        self._beacons[beacon.did] = beacon
        self.batch.beacons[beacon.did] = beacon

    def stage_countersign_pair(self, target_cid: str, witness_did: str) -> None:
        self._pairs[(target_cid, witness_did)] = True

    def stage_rejection(self, rejection: Rejection) -> None:
        self._rejections[rejection.token_hash] = rejection
        self.batch.rejections.append(rejection)

    def _add_key(self, rec: IdentityKeyRecord) -> bool:
        per_did = self._keys.setdefault(rec.did, {})
        raw = decode_multikey(rec.public_key_multibase)
        known = per_did.setdefault(rec.key_id, [])
        if raw in known:
            return False
        known.append(raw)
        return True
