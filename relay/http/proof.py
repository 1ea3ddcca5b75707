"""Proof-plane routes (WEB-RELAY.md "Operation Ingestion", "Operation Log",
"Identity and Content State"; openapi.yaml).

Handlers read the relay from ``request.app.state.relay``; they parse, call
the engine or the store reader, and shape the answer through ``wire``.
"""

from __future__ import annotations

from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse

from peer.base import (
    FANOUT_HOP_HEADER,
    LOCAL_ONLY_HEADER,
    RELAY_SENDER_HEADER,
    RELAY_SENDER_PROOF_HEADER,
    UNKNOWN_CURSOR_FIELD,
    UNKNOWN_CURSOR_HEADER,
)
from relay.parse_pool import ParseBusy
from relay.protocol import ProtocolError, decode_jws
from relay.scope.pages import scoped_log_page
from relay.version import PROTOCOL_NAME, RELAY_VERSION
from stores.base import ChainRecord, LogPage, UnknownCursorError

from . import wire
from .context import relay_of
from .errors import ApiError
from .operations_body import parse_operations_body
from .params import page_params, read_body_capped, scope_param


async def well_known(request: Request) -> JSONResponse:
    relay = relay_of(request)
    return JSONResponse(
        {
            "did": relay.did,
            "protocol": PROTOCOL_NAME,
            "version": RELAY_VERSION,
            "proof": True,
            "content": relay.config.content,
            "log": relay.config.log,
            "profile": relay.profile_token,
            # additive to v0.7.1
            "changesFeed": await relay.feed.describe(),
            "sync": relay.describe_sync(),
            "peers": relay.advertised_peers(),
        }
    )


async def post_operations(request: Request) -> JSONResponse:
    relay = relay_of(request)
    body = await read_body_capped(request, relay.config.max_body_bytes)
    # a large body is parsed off the event loop (relay.parse_pool)
    try:
        tokens = await relay.parse_pool.parse(parse_operations_body, body)
    except ParseBusy:  # answered 503 (relay.http.errors); counted here, where its kind is known
        relay.metrics.parse_queue_refused("operations")
        raise
    # a relay's push names and proves the relay (echo suppression, fan-out);
    # a client's does not
    headers = request.headers
    results = await relay.ingest_pushed(
        tokens,
        headers.get(RELAY_SENDER_HEADER),
        headers.get(FANOUT_HOP_HEADER),
        headers.get(RELAY_SENDER_PROOF_HEADER),
    )
    return JSONResponse({"results": [wire.ingestion_result(r) for r in results]})


async def get_operation(request: Request) -> JSONResponse:
    op = await relay_of(request).store.get_operation(request.path_params["cid"])
    if op is None:
        raise ApiError(404, "operation not found")
    return JSONResponse(wire.operation(op))


async def get_operation_countersignatures(request: Request) -> JSONResponse:
    store = relay_of(request).store
    cid = request.path_params["cid"]
    if await store.get_operation(cid) is None:
        raise ApiError(404, "operation not found")
    tokens = await store.get_countersignatures(cid)
    return JSONResponse({"operationCID": cid, "countersignatures": tokens})


async def get_countersignatures(request: Request) -> JSONResponse:
    # v0.7.1 relays answer 200 (possibly empty) for any known operation and
    # 404 only for a CID that is neither an operation nor a countersigned
    # target. WEB-RELAY.md names the field ``cid``, v0.7.1 clients read
    # ``operationCID``: both are sent.
    store = relay_of(request).store
    cid = request.path_params["cid"]
    tokens = await store.get_countersignatures(cid)
    if not tokens and await store.get_operation(cid) is None:
        raise ApiError(404, "no countersignatures for this CID")
    return JSONResponse({"cid": cid, "operationCID": cid, "countersignatures": tokens})


async def chain_or_404(
    request: Request, kind: Literal["identity", "content"], chain_id: str
) -> ChainRecord:
    relay = relay_of(request)
    chain = await relay.store.get_chain(chain_id)
    # A peer reading through us asks for local state only (no read-through cycles).
    local_only = request.headers.get(LOCAL_ONLY_HEADER) is not None
    missing = chain is None or chain.kind != kind
    if missing and not local_only and await relay.read_through(kind, chain_id):
        chain = await relay.store.get_chain(chain_id)
    if chain is None or chain.kind != kind:
        raise ApiError(404, f"{kind} chain not found")
    return chain


async def get_identity(request: Request) -> JSONResponse:
    chain = await chain_or_404(request, "identity", request.path_params["did"])
    return JSONResponse(wire.identity(chain))


async def get_content(request: Request) -> JSONResponse:
    chain = await chain_or_404(request, "content", request.path_params["content_id"])
    return JSONResponse(wire.content(chain))


async def _chain_log(
    request: Request, kind: Literal["identity", "content"], chain_id: str
) -> LogPage | None:
    """The page after ``after``, or None when ``after`` is not in this chain."""
    after, limit = page_params(request)
    await chain_or_404(request, kind, chain_id)
    try:
        return await relay_of(request).store.read_chain_log(chain_id, after, limit)
    except UnknownCursorError:
        return None


def unknown_cursor_response() -> JSONResponse:
    """v0.7.1 answers an unknown ``after`` with an empty last page; we say so
    too (header and field, both additive) so a follower can tell "caught up"
    from "your cursor means nothing here" and reset instead of stalling."""
    return JSONResponse(
        {"entries": [], "cursor": None, UNKNOWN_CURSOR_FIELD: True},
        headers={UNKNOWN_CURSOR_HEADER: "unknown"},
    )


async def get_identity_log(request: Request) -> JSONResponse:
    page = await _chain_log(request, "identity", request.path_params["did"])
    if page is None:
        return unknown_cursor_response()
    return JSONResponse(wire.chain_log(page))


async def get_content_log(request: Request) -> JSONResponse:
    page = await _chain_log(request, "content", request.path_params["content_id"])
    if page is None:
        return unknown_cursor_response()
    return JSONResponse(wire.chain_log(page))


async def get_beacon(request: Request) -> JSONResponse:
    record = await relay_of(request).store.get_beacon(request.path_params["did"])
    if record is None:
        raise ApiError(404, "beacon not found")
    payload: dict[str, Any]
    try:
        payload = decode_jws(record.jws_token).payload
    except ProtocolError as exc:  # stored tokens were verified; this is corruption
        raise ApiError(500, "stored beacon is unreadable") from exc
    return JSONResponse(wire.beacon(record, payload))


async def get_log(request: Request) -> JSONResponse:
    relay = relay_of(request)
    if not relay.config.log:
        raise ApiError(501, "the global log is not enabled on this relay")
    after, limit = page_params(request)
    scope = scope_param(request)
    try:
        if scope is not None:  # additive: a scope's entries with their closure
            scoped = await scoped_log_page(
                relay.store, scope, after, limit, checkpoints=relay.scope_checkpoints
            )
            return JSONResponse(wire.scoped_log(scoped))
        page = await relay.store.read_log(after, limit)
    except UnknownCursorError:
        return unknown_cursor_response()
    return JSONResponse(wire.global_log(page))
