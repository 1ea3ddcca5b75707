"""Identity operation ingestion (WEB-RELAY.md "Chain Resolution", "Fork
Acceptance", "Deletion Semantics").

Genesis verifies the single-op chain. Extensions are routed by the kid DID,
verified O(1) against the state snapshot of their parent (which may be any op
of the chain, so forks verify against the fork point), and move the head when
they win by (createdAt, CID). An extension of a deleted state is rejected; a
fork from before the delete with a later createdAt undeletes.
"""

from __future__ import annotations

from relay.protocol import (
    IdentityState,
    ProtocolError,
    VerifiedIdentityOp,
    verify_identity_extension,
    verify_identity_genesis,
)
from relay.rules.outcomes import Rejected, RejectReason
from stores.base import IdentityKeyRecord, OperationRecord

from .common import (
    Accepted,
    Outcome,
    Submitted,
    check_idempotency,
    depends_on_did,
    depends_on_op,
    kid_did,
    missing,
    rejection_for,
)
from .view import StateView


def ingest_identity(sub: Submitted, view: StateView, now_ms: int) -> Outcome:
    seen = check_idempotency(sub, view)
    if seen is not None:
        return seen
    previous = sub.payload.get("previousOperationCID")
    try:
        if previous is None:
            verified = verify_identity_genesis(sub.decoded, now_ms)
        else:
            outcome = _verify_extension(sub, view, previous, now_ms)
            if isinstance(outcome, Rejected):
                return outcome
            verified = outcome
    except ProtocolError as exc:
        return rejection_for(exc)
    _stage(sub, verified, view)
    return Accepted(
        "identity-op", verified.did, (depends_on_op(sub.cid), depends_on_did(verified.did))
    )


def _verify_extension(
    sub: Submitted, view: StateView, previous: object, now_ms: int
) -> VerifiedIdentityOp | Rejected:
    did = kid_did(sub)
    if did is None:
        return Rejected(RejectReason.MALFORMED, "identity extension kid must be a DID URL")
    if not isinstance(previous, str):
        return Rejected(RejectReason.MALFORMED, "previousOperationCID must be a string")
    parent = view.operation(previous)
    if parent is None:
        return missing(
            RejectReason.MISSING_PREVIOUS, f"previous operation {previous}", depends_on_op(previous)
        )
    if parent.kind != "identity-op" or parent.chain_id != did or parent.state is None:
        return Rejected(
            RejectReason.WRONG_CHAIN, f"previous operation {previous} is not in identity {did}"
        )
    return verify_identity_extension(
        sub.decoded,
        did,
        previous,
        IdentityState.from_record(parent.state),
        parent.created_at_ms,
        now_ms,
    )


def _stage(sub: Submitted, verified: VerifiedIdentityOp, view: StateView) -> None:
    op = verified.operation
    record = OperationRecord(
        cid=sub.cid,
        jws_token=sub.token,
        kind="identity-op",
        chain_id=verified.did,
        author_did=verified.did,
        parent_cid=op.previous_cid,
        created_at_ms=op.created_at_ms,
        state=verified.state.to_record(),
    )
    view.stage_chain_op(record, "identity")
    view.stage_keys(
        IdentityKeyRecord(verified.did, key.id, key.public_key_multibase)
        for key in verified.state.all_keys()
    )
