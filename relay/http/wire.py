"""Wire shapes: the camelCase JSON of openapi.yaml / WEB-RELAY.md, produced
here and nowhere else."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from relay.ingest.status import OpStatus, PendingOverview
from relay.peering.link_view import LinkView
from relay.protocol import ContentState, IdentityState
from relay.rules.forks import HEAD_RULE, ChainOp, head_reason
from relay.rules.outcomes import IngestionResult
from relay.scope.pages import ScopedPage
from stores.base import BeaconRecord, ChainRecord, LogPage, OperationRecord

_CHAIN_TYPE = {"identity-op": "identity", "content-op": "content"}


def ingestion_result(result: IngestionResult) -> dict[str, Any]:
    out: dict[str, Any] = {"cid": result.cid, "status": result.status.value}
    if result.kind is not None:
        out["kind"] = result.kind
    if result.chain_id is not None:
        out["chainId"] = result.chain_id
    if result.error is not None:
        out["error"] = result.error
    if result.reason is not None:  # additive: the rejection's reason enum value
        out["reason"] = result.reason.value
    return out


def operation(op: OperationRecord) -> dict[str, Any]:
    return {
        "cid": op.cid,
        "jwsToken": op.jws_token,
        "chainType": _CHAIN_TYPE.get(op.kind, op.kind),
        "chainId": op.chain_id,
        "kind": op.kind,
    }


def identity(chain: ChainRecord) -> dict[str, Any]:
    state = IdentityState.from_record(chain.state)
    return {"did": chain.chain_id, "headCID": chain.head_cid, "state": state.to_json()}


def content(chain: ChainRecord) -> dict[str, Any]:
    state = ContentState.from_record(chain.state)
    return {
        "contentId": chain.chain_id,
        "genesisCID": chain.genesis_cid,
        "headCID": chain.head_cid,
        "state": state.to_json(),
    }


def beacon(record: BeaconRecord, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "did": record.did,
        "jwsToken": record.jws_token,
        "beaconCID": record.cid,
        "payload": payload,
    }


def global_log(page: LogPage) -> dict[str, Any]:
    return {
        "entries": [
            {"cid": e.cid, "jwsToken": e.jws_token, "kind": e.kind, "chainId": e.chain_id}
            for e in page.entries
        ],
        "cursor": page.cursor,
    }


def scoped_log(page: ScopedPage) -> dict[str, Any]:
    entries = []
    for admitted in page.entries:
        e = admitted.entry
        item: dict[str, Any] = {
            "cid": e.cid, "jwsToken": e.jws_token, "kind": e.kind, "chainId": e.chain_id,
        }  # fmt: skip
        if admitted.late:
            item["closure"] = True  # sent ahead of its dependant, behind its own position
        entries.append(item)
    out: dict[str, Any] = {"entries": entries, "cursor": page.cursor}
    if page.scanned_to is not None:
        out["scannedTo"] = page.scanned_to
    if page.missing:  # additive: closure members this relay lacks (it cannot serve them)
        out["closureMissing"] = page.missing
    return out


def chain_log(page: LogPage) -> dict[str, Any]:
    return {
        "entries": [{"cid": e.cid, "jwsToken": e.jws_token} for e in page.entries],
        "cursor": page.cursor,
    }


# -- additive routes (op status, pending overview, fork tips) --------------------


_WAITING_FOR_POLICY = (
    "verified, its dependencies met; waiting for the write policy, which failed on it "
    "(policy-error): tried again by the relay"
)


def op_status(status: OpStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"cid": status.cid, "status": status.state.value}
    if status.location is not None:
        loc = status.location
        out.update(seq=loc.seq, kind=loc.kind, chainType=_CHAIN_TYPE.get(loc.kind, loc.kind))
        out["chainId"] = loc.chain_id
    elif status.pending is not None:
        waits_for = status.pending.waits_for or None
        out.update(waitingFor=waits_for, since=status.pending.since_ms)
        if waits_for is None:
            out["detail"] = "received, not verified yet"
        else:  # the key, split: "op:<cid>" / "did:<did>" / "policy:<cid>"
            kind, _, ident = waits_for.partition(":")
            out["dependency"] = {"kind": kind, "id": ident}
            if kind == "policy":
                out["detail"] = _WAITING_FOR_POLICY
    elif status.note is not None:
        note = status.note
        out.update(reason=note.reason, detail=note.detail, rejectedAt=note.at_ms)
        out["tokenHash"] = note.token_hash or None
    return out


def pending_overview(overview: PendingOverview) -> dict[str, Any]:
    oldest = overview.oldest
    return {
        "at": overview.at_ms,
        "total": overview.total,
        "unverified": overview.unverified,
        "copies": overview.copies,  # additive: not counted in total (ops by CID)
        "byDependency": {
            kind: {"count": ages.count, "ages": ages.ages}
            for kind, ages in overview.by_dependency.items()
        },
        "oldest": None
        if oldest is None
        else {
            "cid": oldest.cid,
            "waitingFor": oldest.waits_for,
            "since": oldest.since_ms,
            "ageSeconds": overview.oldest_age_s,
        },
    }


def chain_tips(tips: Sequence[ChainOp]) -> dict[str, Any]:
    """Tips in head-key order (the head last), as the feed snapshot lists them."""
    head = tips[-1]
    return {
        "headCID": head.cid,
        "headRule": HEAD_RULE,
        "headReason": head_reason(tips).value,
        "forked": len(tips) > 1,
        "tips": [
            {"cid": op.cid, "createdAt": op.created_at_ms, "head": op.cid == head.cid}
            for op in tips
        ],
    }


def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def link(view: LinkView) -> dict[str, Any]:
    """A replication link, as ``GET /peers`` and ``dfos-relay peers --json`` show it."""
    r = view.record
    return {
        "peer": r.peer_url,
        "scopeId": r.scope_id,
        "direction": r.direction,
        "state": r.state,
        "receivedToken": r.received_token,
        "appliedToken": r.applied_token,
        "pending": list(r.pending_tokens),
        "lagOps": view.lag_ops,
        "lagSeconds": None if view.lag_seconds is None else round(view.lag_seconds, 3),
        "failures": r.failures,
        "lastSuccessAt": iso_ms(r.last_success_ms),
        "lastFailureAt": iso_ms(r.last_failure_ms),
        "lastError": r.last_error,
        "diagnostics": r.diagnostics,
    }
