"""Wire shapes: the camelCase JSON of openapi.yaml / WEB-RELAY.md, produced
here and nowhere else."""

from __future__ import annotations

from typing import Any

from relay.protocol import ContentState, IdentityState
from relay.rules.outcomes import IngestionResult
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


def chain_log(page: LogPage) -> dict[str, Any]:
    return {
        "entries": [{"cid": e.cid, "jwsToken": e.jws_token} for e in page.entries],
        "cursor": page.cursor,
    }
