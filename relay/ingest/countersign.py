"""Countersignature ingestion (WEB-RELAY.md "Countersignatures", "Relay-Level
Checks"): the target must exist (else the op waits for it), the witness must
differ from the target's author and must not be deleted, and there is at most
one countersignature per (target, witness): a second answers ``duplicate``.
"""

from __future__ import annotations

from relay.protocol import ProtocolError, verify_countersign
from relay.rules.outcomes import Rejected, RejectReason
from stores.base import CountersignatureRecord, OperationRecord

from .common import (
    Accepted,
    Duplicate,
    Outcome,
    Submitted,
    check_idempotency,
    deleted_identity,
    depends_on_did,
    depends_on_op,
    missing,
    rejection_for,
)
from .view import StateView


def ingest_countersign(sub: Submitted, view: StateView, now_ms: int) -> Outcome:
    seen = check_idempotency(sub, view)
    if seen is not None:
        return seen
    witness = sub.payload.get("did")
    target_cid = sub.payload.get("targetCID")
    if not isinstance(witness, str) or not isinstance(target_cid, str):
        return Rejected(RejectReason.MALFORMED, "countersign did and targetCID must be strings")
    if view.chain(witness) is None:
        return missing(
            RejectReason.MISSING_IDENTITY, f"identity {witness}", depends_on_did(witness)
        )
    if view.is_deleted_identity(witness):
        return deleted_identity(witness, "witness identity")
    try:
        verified = verify_countersign(sub.decoded, view.resolve_key, now_ms)
    except ProtocolError as exc:
        return rejection_for(exc)
    target = view.operation(target_cid)
    if target is None:
        return missing(
            RejectReason.MISSING_TARGET, f"target {target_cid}", depends_on_op(target_cid)
        )
    if target.author_did == witness:
        return Rejected(RejectReason.SELF_COUNTERSIGN, "witness is the author of the target")
    if view.has_countersign(target_cid, witness):
        return Duplicate("countersign", target_cid)
    view.stage_operation(
        OperationRecord(
            sub.cid,
            sub.token,
            "countersign",
            target_cid,
            witness,
            None,
            verified.payload.created_at_ms,
        )
    )
    view.stage_countersign_pair(target_cid, witness)
    view.batch.countersignatures.append(
        CountersignatureRecord(target_cid, witness, sub.cid, sub.token)
    )
    return Accepted("countersign", target_cid, (depends_on_op(sub.cid),))
