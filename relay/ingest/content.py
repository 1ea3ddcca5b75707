"""Content operation ingestion (WEB-RELAY.md "Chain Resolution", "Deletion
Semantics"; PROTOCOL.md "Content Chain Authorization").

Genesis needs the creator's identity (for its key). Extensions are routed by
previousOperationCID to their chain, verified against the parent's state
snapshot with authorization enforced, and rejected when either the signer or
the chain's creator identity is deleted.
"""

from __future__ import annotations

from relay.protocol import (
    ContentState,
    ProtocolError,
    VerifiedContentOp,
    verify_content_extension,
    verify_content_genesis,
)
from relay.rules.outcomes import Rejected, RejectReason
from stores.base import OperationRecord

from .common import (
    Accepted,
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


def ingest_content(sub: Submitted, view: StateView, now_ms: int) -> Outcome:
    seen = check_idempotency(sub, view)
    if seen is not None:
        return seen
    signer = sub.payload.get("did")
    if not isinstance(signer, str):
        return Rejected(RejectReason.MALFORMED, "content operation did must be a string")
    gate = _signer_gate(signer, view)
    if gate is not None:
        return gate
    previous = sub.payload.get("previousOperationCID")
    try:
        if previous is None:
            verified = verify_content_genesis(sub.decoded, view.resolve_key, now_ms)
        else:
            outcome = _verify_extension(sub, view, previous, now_ms)
            if isinstance(outcome, Rejected):
                return outcome
            verified = outcome
    except ProtocolError as exc:
        return rejection_for(exc)
    _stage(sub, verified, view)
    return Accepted("content-op", verified.content_id, (depends_on_op(sub.cid),))


def _signer_gate(signer: str, view: StateView) -> Rejected | None:
    if view.chain(signer) is None:
        return missing(RejectReason.MISSING_IDENTITY, f"identity {signer}", depends_on_did(signer))
    if view.is_deleted_identity(signer):
        return deleted_identity(signer, "signer identity")
    return None


def _verify_extension(
    sub: Submitted, view: StateView, previous: object, now_ms: int
) -> VerifiedContentOp | Rejected:
    if not isinstance(previous, str):
        return Rejected(RejectReason.MALFORMED, "previousOperationCID must be a string")
    parent = view.operation(previous)
    if parent is None:
        return missing(
            RejectReason.MISSING_PREVIOUS, f"previous operation {previous}", depends_on_op(previous)
        )
    if parent.kind != "content-op" or parent.state is None:
        return Rejected(RejectReason.WRONG_CHAIN, f"{previous} is not a content operation")
    parent_state = ContentState.from_record(parent.state)
    creator = parent_state.creator_did
    if view.is_deleted_identity(creator):
        return deleted_identity(creator, "content creator identity")
    return verify_content_extension(
        sub.decoded,
        previous,
        parent_state,
        parent.created_at_ms,
        view.resolve_key,
        now_ms,
        enforce_authorization=True,
    )


def _stage(sub: Submitted, verified: VerifiedContentOp, view: StateView) -> None:
    op = verified.operation
    record = OperationRecord(
        cid=sub.cid,
        jws_token=sub.token,
        kind="content-op",
        chain_id=verified.content_id,
        author_did=verified.signer_did,
        parent_cid=op.previous_cid,
        created_at_ms=op.created_at_ms,
        state=verified.state.to_record(),
    )
    view.stage_chain_op(record, "content")
