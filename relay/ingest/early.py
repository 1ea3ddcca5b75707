"""The write policy asked for a request's ops before its sequencing session.

The operator's function may be slow (a call to the operator's service), and
asked inside the session it holds the sequencing lock, and so all other
ingestion, for its whole latency. So once the precheck has verified a
request's ops, the gate asks the function about each op it verified, with no
lock held and concurrently with other requests' sessions (``WriteGate.ask_early``),
and the session is handed the answers (``WriteGate.preset_early``): it waits
on the function only for ops it could not judge beforehand.

An early answer is only a guess at what the session will show the function:
``shown`` derives, from the token alone (and the chain of a content op's
parent), the fields the function sees (kind, chain, signer, createdAt, token,
and so the payload). The session uses the answer only for an op whose record
shows exactly these (``WriteGate.screen``); any other is held and asked as
before. Not checked here: the chain rules. The function may so be asked
about an op the session then rejects, parks, or finds a duplicate (shown as
the session would show it, were it staged). It is not asked about an op
whose parent (or target) is neither in the request nor stored, nor about
exempt, banned (as the cache knows) or listed signers' ops; a call late
gives no answer (the session asks again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from relay.protocol import (
    ProtocolError,
    content_id_from_genesis_cid,
    parse_artifact,
    parse_beacon,
    parse_content_operation,
    parse_countersign,
    parse_identity_operation,
)
from stores.base import OperationRecord, RelayStore

from .common import Submitted
from .order import identity_did
from .policy import EarlyDecisions, WriteGate


async def ask_early(
    gate: WriteGate, submitted: Sequence[tuple[int, Submitted]], store: RelayStore
) -> EarlyDecisions:
    """The function's answers on the ops of ``submitted`` the precheck
    verified (none without a function): asked now, outside any session. Not
    asked: an op whose parent (or countersigned target) is neither in the
    request nor in the store, which would wait for it."""
    if gate.policy.function is None:
        return {}
    verified = [sub for _, sub in submitted if _checked(sub)]
    if not verified:
        return {}
    chains = await _chains(verified, store)
    ops = []
    for sub in verified:
        record = shown(sub, chains)
        if record is not None:
            ops.append((record, sub.payload))
    return await gate.ask_early(ops)


def _checked(sub: Submitted) -> bool:
    """Its signature checked under a known key, and its payload is its CID's."""
    decoded = sub.decoded
    return (
        decoded.verified_key is not None
        and decoded.payload_cid is not None
        and decoded.payload_cid[0] == sub.cid
    )


def shown(sub: Submitted, chains: Mapping[str, str]) -> OperationRecord | None:
    """The record the session stages for ``sub`` if it verifies, as far as
    the policy is shown it (no state, no parent); None if its payload does
    not parse, or the op it depends on is not in ``chains`` (``_chains``:
    the session would park it, or a content update's chain is unknown)."""
    payload, cid, kind = sub.payload, sub.cid, sub.kind
    try:
        if kind == "identity-op":
            identity = parse_identity_operation(payload)
            previous = identity.previous_cid
            did = identity_did(sub)  # its kid's, or (a genesis) its CID's
            chain, created = did, identity.created_at_ms
        elif kind == "content-op":
            content = parse_content_operation(payload)
            did, previous = content.did, content.previous_cid
            chain = chains.get(previous) if previous else content_id_from_genesis_cid(cid)
            created = content.created_at_ms
        elif kind == "countersign":
            witness = parse_countersign(payload)
            did, chain, created = witness.did, witness.target_cid, witness.created_at_ms
            previous = witness.target_cid
        elif kind in ("beacon", "artifact"):
            standalone = parse_beacon(payload) if kind == "beacon" else parse_artifact(payload)
            did, chain, created = standalone.did, standalone.did, standalone.created_at_ms
            previous = None
        else:
            return None
    except ProtocolError:
        return None
    if did is None or chain is None or (previous is not None and previous not in chains):
        return None
    return OperationRecord(cid, sub.token, kind, chain, did, None, created)  # type: ignore[arg-type]


async def _chains(verified: Sequence[Submitted], store: RelayStore) -> dict[str, str]:
    """CID -> chain (contentId of a content op) of the ops the request's ops
    depend on (their parent, or the target they countersign) and that are
    known: the request's own (a content update's chain followed through it),
    else the store's."""
    depends: dict[str, str] = {}  # CID -> the CID it depends on
    chains: dict[str, str] = {}
    for sub in verified:
        field = "targetCID" if sub.kind == "countersign" else "previousOperationCID"
        on = sub.payload.get(field)
        if isinstance(on, str):
            depends[sub.cid] = on
        elif on is None and sub.kind == "content-op":
            try:
                chains[sub.cid] = content_id_from_genesis_cid(sub.cid)
            except ProtocolError:
                continue
        elif on is None and sub.kind == "identity-op":
            chains[sub.cid] = ""  # known to be in the request; its chain is not needed
    outside = {on for on in depends.values() if on not in depends and on not in chains}
    if outside:
        for cid, op in (await store.read_operations(outside)).items():
            chains[cid] = op.chain_id
    for cid in depends:  # follow each op to one whose chain is known
        path, at = [], cid
        while at in depends and at not in chains and at not in path:
            path.append(at)
            at = depends[at]
        chain = chains.get(at)
        if chain is not None:
            chains.update(dict.fromkeys(path, chain))
    return chains
