"""The working state of one sequencing session.

Verification is synchronous; the store is async and may be remote. So each
round of ingestion first *prefetches* in one ``read_state`` everything the
round's ops can touch (their CIDs, parents, targets, chains, keys, beacons),
then verifies op by op against this view. Accepted ops are staged into the
view (so later ops of the batch see them) and into one ``CommitBatch``
written atomically at the end of the session. Staging an op asks the write
gate first (``policy.py``), which may refuse or hold it before anything of
it is staged. With a gate, each round also reads the bans of the signers
its ops claim (an op that verifies is signed by the signer it claims), so
the gate judges them by the store's bans as they are under the sequencing
lock, not by a cache another worker's ban has not reached yet.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from relay.protocol import decode_multikey, resolve_from_key_index
from relay.rules.heads import is_new_head
from stores.base import (
    BeaconRecord,
    ChainKind,
    ChainRecord,
    CommitBatch,
    IdentityKeyRecord,
    OperationRecord,
    Rejection,
    SequencingSession,
    StateQuery,
    creator_of,
)

from .policy import WriteGate

_K = TypeVar("_K", bound=Hashable)


@dataclass(slots=True)
class Needs:
    """What a round of ops may read, gathered before verification."""

    cids: set[str] = field(default_factory=set)
    dids: set[str] = field(default_factory=set)
    beacon_dids: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    token_hashes: set[str] = field(default_factory=set)
    buffered: set[str] = field(default_factory=set)  # the round's own CIDs
    signers: set[str] = field(default_factory=set)  # the DIDs the round's ops claim as signer


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
        # the token the store's buffer holds under each CID read (None: none);
        # the session holds the sequencing lock, so it does not change under it
        self._buffered: dict[str, str | None] = {}
        self._copies: dict[str, set[str]] = {}  # token hashes of the copies beside them
        # the ban's reason per signer DID read (None: not banned); read under
        # the sequencing lock, so a ban stored before the session is here
        self._bans: dict[str, str | None] = {}
        self.gate: WriteGate | None = None

    # prefetch ---------------------------------------------------------------
    async def prefetch(self, needs: Needs, count_pending: bool = False) -> int | None:
        """Load, in one ``read_state``, whatever of ``needs`` is not cached yet.

        Links the store follows from what it finds (content op -> its chain
        -> its creator's chain and keys) are also followed here from what is
        already cached, since the store only sees what is asked. Returns the
        number of ops waiting in the buffer if ``count_pending``.
        """
        cached_ops = [op for c in needs.cids if (op := self._ops.get(c)) is not None]
        chain_ids = needs.dids | {op.chain_id for op in cached_ops if op.kind == "content-op"}
        creators = {
            creator
            for chain_id in chain_ids
            if (chain := self._chains.get(chain_id)) is not None
            and (creator := creator_of(chain)) is not None
        }
        query = StateQuery(
            cids=_uncached(needs.cids, self._ops),
            chain_ids=_uncached(chain_ids | creators, self._chains),
            key_dids=_uncached(needs.dids | creators, self._keys),
            beacon_dids=_uncached(needs.beacon_dids, self._beacons),
            pairs=_uncached(needs.pairs, self._pairs),
            token_hashes=_uncached(needs.token_hashes, self._rejections),
            count_pending=count_pending,
            buffered=_uncached(needs.buffered, self._buffered),
            ban_dids=_uncached(needs.signers, self._bans) if self.gate else frozenset(),
        )
        if query.is_empty():
            return None
        rows = await self.session.read_state(query)
        for cid in query.cids:
            self._ops[cid] = rows.operations.get(cid)
        for chain_id in query.chain_ids:
            self._chains[chain_id] = rows.chains.get(chain_id)
        for chain_id, chain in rows.chains.items():  # followed links
            self._chains.setdefault(chain_id, chain)
        for did in query.key_dids:
            self._keys[did] = {}
        for did, records in rows.identity_keys.items():
            if did in query.key_dids or did not in self._keys:
                self._keys.setdefault(did, {})
                for rec in records:
                    self._add_key(rec)
        for did in query.beacon_dids:
            self._beacons[did] = rows.beacons.get(did)
        for pair in query.pairs:
            self._pairs[pair] = pair in rows.pairs
        for token_hash in query.token_hashes:
            self._rejections[token_hash] = rows.rejections.get(token_hash)
        for cid in query.buffered:
            self._buffered[cid] = rows.buffered.get(cid)
        self._copies.update(rows.copies)
        for did in query.ban_dids:
            self._bans[did] = rows.bans.get(did)
        return rows.pending

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

    def buffered_token(self, cid: str) -> str | None:
        """The token the store buffered under ``cid`` when the session began
        (None: none, or not read: every op's own CID is read with its round,
        unless the session took it from the buffer and so knows it)."""
        return self._buffered.get(cid)

    def stored_copies(self, cid: str) -> set[str]:
        """The token hashes of the copies the store kept beside ``cid`` when
        the session began (read with ``buffered_token``; empty if not read)."""
        return self._copies.get(cid, set())

    @property
    def bans(self) -> Mapping[str, str | None]:
        """The stored bans of the signer DIDs read so far (DID -> the ban's
        reason, None: not banned); a DID not read is absent."""
        return self._bans

    def learn_buffered(self, cid: str, token: str) -> None:
        """What a read of the buffer itself (``take_waiting``) found."""
        self._buffered.setdefault(cid, token)

    def is_deleted_identity(self, did: str) -> bool:
        chain = self._chains.get(did)
        return chain is not None and bool(chain.state.get("deleted"))

    def resolve_key(self, kid: str) -> Sequence[bytes]:
        """Historical resolver: any key the identity ever held, in any role."""
        return resolve_from_key_index(self._keys, kid)

    # staging -----------------------------------------------------------------
    def stage_operation(self, op: OperationRecord) -> None:
        """Every handler stages its op first: the gate may raise here, and
        then nothing of the op has been staged."""
        if self.gate is not None:
            self.gate.screen(op, self._bans)
        self._ops[op.cid] = op
        self.batch.operations.append(op)
        self.batch.resolved_cids.add(op.cid)

    def stage_chain(self, chain: ChainRecord) -> None:
        self._chains[chain.chain_id] = chain
        self.batch.chains[chain.chain_id] = chain

    def stage_chain_op(self, op: OperationRecord, kind: ChainKind) -> None:
        """Stage an identity or content op and its chain: begun by a genesis,
        its head (and head state, the op's) moved by an op that wins the head
        rule."""
        state = op.state
        assert state is not None, "a chain op carries the chain's state after it"
        self.stage_operation(op)
        chain = self._chains.get(op.chain_id)
        if chain is None:
            head = ChainRecord(op.chain_id, kind, op.cid, op.cid, op.created_at_ms, state)
        elif is_new_head(op.created_at_ms, op.cid, chain.head_created_at_ms, chain.head_cid):
            genesis = chain.genesis_cid
            head = ChainRecord(op.chain_id, kind, genesis, op.cid, op.created_at_ms, state)
        else:
            return
        self.stage_chain(head)

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


def _uncached(wanted: Iterable[_K], cache: Mapping[_K, object]) -> frozenset[_K]:
    return frozenset(key for key in wanted if key not in cache)
