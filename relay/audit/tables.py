"""The rows besides the log, checked against what the replay established.

- chains: each row must be a chain the log holds, with the head the head
  rule picks over its ops (highest createdAt, then CID), that head's state,
  its genesis and kind; a chain of the log without a row is missing;
- identity keys: each row must be a key of some state of its identity, and
  every such key must have a row (the historical key resolver reads them);
- beacons: one row per DID, the newest beacon op it signed;
- countersignatures: one row per countersign op, naming its target and
  witness;
- blobs: a document some content op of a chain its creator created commits to;
- the raw buffer: no op that is already sequenced; every copy kept beside a
  buffered op, under its own token's hash (a copy of a sequenced op, or of a
  CID with nothing buffered, should have gone with it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from relay.protocol import token_hash
from stores.audit import AuditSnapshot

from .findings import Finding
from .replay import Replay


async def check_tables(snap: AuditSnapshot, replay: Replay) -> AsyncIterator[Finding]:
    async for finding in _chains(snap, replay):
        yield finding
    async for finding in _keys(snap, replay):
        yield finding
    async for finding in _beacons(snap, replay):
        yield finding
    async for finding in _countersignatures(snap, replay):
        yield finding
    async for blob in snap.blob_keys():
        creator, document = blob
        if document not in replay.documents.get(creator, set()):
            yield Finding(
                "orphan",
                f"blob {creator} {document}",
                "no content op of a chain this creator created commits to it",
            )
    buffered: set[str] = set()
    async for pending in snap.raw_ops():
        buffered.add(pending.cid)
        if pending.cid in replay.ops:
            yield Finding("orphan", pending.cid, "buffered, but already sequenced")
    async for digest, copy in snap.raw_copies():
        if copy.cid in replay.ops:
            yield Finding("orphan", copy.cid, f"copy {digest}: its op is already sequenced")
        elif copy.cid not in buffered:
            yield Finding("orphan", copy.cid, f"copy {digest}: no op buffered under its CID")
        elif digest != token_hash(copy.jws_token):
            yield Finding("orphan", copy.cid, f"copy {digest}: kept under another token's hash")


async def _chains(snap: AuditSnapshot, replay: Replay) -> AsyncIterator[Finding]:
    seen: set[str] = set()
    async for chain in snap.chains():
        seen.add(chain.chain_id)
        head = replay.heads.get(chain.chain_id)
        if head is None:
            yield Finding("orphan", chain.chain_id, "a chain row without any op in the log")
            continue
        wrong = [
            f"{name} {stored!r}, the log says {real!r}"
            for name, stored, real in (
                ("kind", chain.kind, head.kind),
                ("genesis", chain.genesis_cid, head.genesis_cid),
                ("head", chain.head_cid, head.cid),
                ("head createdAt", chain.head_created_at_ms, head.created_at_ms),
            )
            if stored != real
        ]
        if wrong:
            yield Finding("chain-head", chain.chain_id, "stored " + "; ".join(wrong))
        elif chain.state != replay.ops[head.cid].state:
            yield Finding("chain-state", chain.chain_id, "stored state differs from its head's")
    for chain_id in sorted(replay.heads.keys() - seen):
        yield Finding("missing-row", chain_id, "ops of this chain are in the log, its row is not")


async def _keys(snap: AuditSnapshot, replay: Replay) -> AsyncIterator[Finding]:
    stored: set[tuple[str, str, str]] = set()
    async for key in snap.identity_keys():
        stored.add((key.did, key.key_id, key.public_key_multibase))
        if (key.key_id, key.public_key_multibase) not in replay.state_keys.get(key.did, set()):
            yield Finding(
                "orphan",
                f"key {key.did}#{key.key_id}",
                "not a key of any state of this identity in the log",
            )
    for did, keys in sorted(replay.state_keys.items()):
        for key_id, multibase in sorted(keys):
            if (did, key_id, multibase) not in stored:
                yield Finding(
                    "missing-row",
                    f"key {did}#{key_id}",
                    "held by the identity in the log, missing from the key index",
                )


async def _beacons(snap: AuditSnapshot, replay: Replay) -> AsyncIterator[Finding]:
    seen: set[str] = set()
    async for beacon in snap.beacons():
        seen.add(beacon.did)
        latest = replay.beacons.get(beacon.did)
        op = replay.ops.get(beacon.cid)
        if op is None or op.kind != "beacon" or op.chain_id != beacon.did:
            yield Finding("orphan", f"beacon {beacon.did}", f"{beacon.cid} is not its beacon op")
        elif replay.tokens.get(beacon.cid) != token_hash(beacon.jws_token):
            yield Finding("op-row", f"beacon {beacon.did}", f"the token of {beacon.cid} differs")
        elif beacon.created_at_ms != op.created_at_ms:
            detail = f"createdAt {beacon.created_at_ms}, the token says {op.created_at_ms}"
            yield Finding("op-row", f"beacon {beacon.did}", detail)
        elif latest is not None and latest[1] != beacon.cid:
            yield Finding(
                "chain-head",
                f"beacon {beacon.did}",
                f"stored {beacon.cid}, the newest is {latest[1]}",
            )
    for did in sorted(replay.beacons.keys() - seen):
        yield Finding("missing-row", f"beacon {did}", "beacon ops are in the log, the row is not")


async def _countersignatures(snap: AuditSnapshot, replay: Replay) -> AsyncIterator[Finding]:
    seen: set[str] = set()
    async for sig in snap.countersignatures():
        seen.add(sig.cid)
        pair = replay.countersigns.get(sig.cid)
        if pair != (sig.target_cid, sig.witness_did):
            yield Finding(
                "orphan",
                f"countersignature {sig.cid or sig.jws_token[:24]}",
                f"of {sig.target_cid} by {sig.witness_did}: no such countersign op",
            )
        elif replay.tokens.get(sig.cid) != token_hash(sig.jws_token):
            detail = f"of {sig.target_cid} by {sig.witness_did}: its token differs from the op's"
            yield Finding("op-row", f"countersignature {sig.cid}", detail)
    for cid in sorted(replay.countersigns.keys() - seen):
        yield Finding("missing-row", cid, "a countersign op without its countersignature row")
