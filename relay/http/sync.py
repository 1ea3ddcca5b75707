"""Reconciliation routes (additive to v0.7.1):

- ``POST /sync/negentropy``: one Negentropy V1 round, body and reply
  ``application/octet-stream``; ``?since=&until=`` (ms) limits both sides
  to a createdAt window, ``?frameLimit=`` is the client's frame limit,
  ``?scope=`` (DIDs and contentIds) limits both sides to that scope's
  effective item set: intent plus dependency closure. At most
  ``MAX_LONG_ROUNDS`` rounds that pause (over 256 ranges), or scoped sets
  built in more than one step, run at once; one more is a 503 with
  ``Retry-After``.
- ``POST /sync/operations``: ``{"cids": [...]}`` (at most 1000) answers
  ``{"operations": [jwsToken...], "missing": [cid...]}`` in transfer order,
  or 413 when that answer would pass ``MAX_FETCH_ANSWER_BYTES`` (8 MiB).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from relay.protocol.untrusted import json_value
from relay.reconcile.server import (
    SyncRequestError,
    answer_round,
    ordered_operations,
    parse_cids,
    parse_frame_limit,
    parse_window,
    read_answer,
)
from stores.base import StoreError

from .context import relay_of
from .errors import ApiError
from .params import read_body_capped, scope_param

OCTET_STREAM = "application/octet-stream"
MAX_FETCH_BODY_BYTES = 128 * 1024  # 1000 CIDs of 59 characters, quoted, with room


async def post_negentropy(request: Request) -> Response:
    relay = relay_of(request)
    config = relay.config
    try:
        window = parse_window(request.query_params)
        frame_limit = parse_frame_limit(request.query_params, config.sync_frame_limit)
        scope = scope_param(request)
        body = await read_body_capped(request, config.sync_max_message_bytes)
        # a scope's set built or brought forward in steps, and a round that
        # pauses, each take a place among the few that may, or are a 503
        scoped = None
        if scope is not None:
            scoped = await relay.scoped_items.storage(scope, relay.long_rounds.held())
        long_round = relay.long_rounds.held()
        reply = await answer_round(relay.sync_index, body, window, frame_limit, scoped, long_round)
    except SyncRequestError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    except StoreError as exc:  # the index cannot be read now: the next round retries it
        raise ApiError(503, f"the sync index is not available: {exc}") from exc
    relay.metrics.reconcile.round_served(len(body), len(reply))
    return Response(reply, media_type=OCTET_STREAM)


async def post_sync_operations(request: Request) -> JSONResponse:
    relay = relay_of(request)
    body = await read_body_capped(request, MAX_FETCH_BODY_BYTES)
    try:
        data = json_value(body)
    except ValueError as exc:
        raise ApiError(400, "request body is not valid JSON") from exc
    try:
        cids = parse_cids(data)
        found = await read_answer(relay.store, cids)
    except SyncRequestError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    tokens, missing = ordered_operations(found, cids)
    return JSONResponse({"operations": tokens, "missing": missing})
