"""Beacon and artifact ingestion: standalone signed statements by one DID.

Both need the signer's identity (for its keys) and refuse deleted signers.
Beacons replace on strictly newer createdAt; an older or equal one answers
``duplicate`` and changes nothing. Artifacts are immutable, one per CID.
"""

from __future__ import annotations

from collections.abc import Callable

from relay.protocol import ProtocolError, verify_artifact, verify_beacon
from relay.rules.outcomes import Rejected, RejectReason
from stores.base import BeaconRecord, OperationRecord

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


def _signer(sub: Submitted, view: StateView) -> str | Rejected:
    did = sub.payload.get("did")
    if not isinstance(did, str):
        return Rejected(RejectReason.MALFORMED, f"{sub.kind} did must be a string")
    if view.chain(did) is None:
        return missing(RejectReason.MISSING_IDENTITY, f"identity {did}", depends_on_did(did))
    if view.is_deleted_identity(did):
        return deleted_identity(did, f"{sub.kind} signer")
    return did


def _record(sub: Submitted, did: str, created_at_ms: int) -> OperationRecord:
    return OperationRecord(sub.cid, sub.token, sub.kind, did, did, None, created_at_ms)  # type: ignore[arg-type]


def ingest_beacon(sub: Submitted, view: StateView, now_ms: int) -> Outcome:
    # Replace-on-newer (WEB-RELAY.md, Ingestion Statuses): another token of a
    # stored beacon (the same payload signed with another of the DID's keys)
    # changes nothing, so it is a duplicate once its signature checks.
    return _ingest_standalone(sub, view, now_ms, _verify_and_stage_beacon, other_token_ok=True)


def ingest_artifact(sub: Submitted, view: StateView, now_ms: int) -> Outcome:
    return _ingest_standalone(sub, view, now_ms, _verify_and_stage_artifact)


def _ingest_standalone(
    sub: Submitted,
    view: StateView,
    now_ms: int,
    verify_and_stage: Callable[[Submitted, StateView, str, int], Outcome],
    other_token_ok: bool = False,
) -> Outcome:
    seen = check_idempotency(sub, view)
    if seen is not None and not (other_token_ok and _other_token(seen)):
        return seen
    did = _signer(sub, view)
    if isinstance(did, Rejected):
        return did
    try:
        return verify_and_stage(sub, view, did, now_ms)
    except ProtocolError as exc:
        return rejection_for(exc)


def _other_token(seen: Duplicate | Rejected) -> bool:
    return isinstance(seen, Rejected) and seen.reason is RejectReason.CID_CONFLICT


def _verify_and_stage_beacon(sub: Submitted, view: StateView, did: str, now_ms: int) -> Outcome:
    verified = verify_beacon(sub.decoded, view.resolve_key, now_ms)
    created = verified.payload.created_at_ms
    current = view.beacon(did)
    if current is not None and created <= current.created_at_ms:
        return Duplicate("beacon", did)
    view.stage_operation(_record(sub, did, created))
    view.stage_beacon(BeaconRecord(did, sub.cid, sub.token, created))
    return Accepted("beacon", did, (depends_on_op(sub.cid),))


def _verify_and_stage_artifact(sub: Submitted, view: StateView, did: str, now_ms: int) -> Outcome:
    verified = verify_artifact(sub.decoded, view.resolve_key, now_ms)
    view.stage_operation(_record(sub, did, verified.payload.created_at_ms))
    return Accepted("artifact", did, (depends_on_op(sub.cid),))
