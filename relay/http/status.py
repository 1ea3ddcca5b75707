"""Explained op status and the pending-buffer overview (additive to v0.7.1).

- ``GET /operations/{cid}/status``: one op's status (``relay.ingest.status``).
- ``POST /operations/status`` with ``{"cids": [...]}`` (1..100 CIDs):
  ``{"results": [...]}``, ``results[i]`` answering ``cids[i]``.
- ``GET /operations/pending``: the buffer by dependency kind and age, and
  the oldest waiting op. Public and read-only, like ``/metrics``: it shows
  counts and one CID with what it waits for, nothing a status query for that
  CID would not show, and it is cached for a second (one aggregate read per
  interval whatever the request rate). Operator *actions* on the buffer
  belong to the DID-authenticated ``/admin`` routes.

These routes sit in the table before ``GET /operations/{cid}`` so that
``/operations/pending`` is not read as a CID.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from relay.protocol import is_cid
from relay.protocol.untrusted import json_value

from . import wire
from .context import relay_of
from .errors import ApiError
from .params import read_body_capped

MAX_STATUS_CIDS = 100


async def get_op_status(request: Request) -> JSONResponse:
    cid = request.path_params["cid"]
    if not is_cid(cid):
        raise ApiError(400, "cid must be an operation CID")
    [status] = await relay_of(request).status.explain_many([cid])
    return JSONResponse(wire.op_status(status))


def parse_status_body(body: bytes) -> list[str]:
    """The ``{"cids": [...]}`` body of POST /operations/status, or 400."""
    try:
        data = json_value(body)
    except ValueError as exc:
        raise ApiError(400, "request body is not valid JSON") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cids"), list):
        raise ApiError(400, 'request body must be {"cids": [...]}')
    cids = data["cids"]
    if not cids:
        raise ApiError(400, "cids must not be empty")
    if len(cids) > MAX_STATUS_CIDS:
        raise ApiError(400, f"at most {MAX_STATUS_CIDS} cids per request")
    if not all(isinstance(cid, str) and is_cid(cid) for cid in cids):
        raise ApiError(400, "every cid must be an operation CID")
    return cids


async def post_op_statuses(request: Request) -> JSONResponse:
    relay = relay_of(request)
    cids = parse_status_body(await read_body_capped(request, relay.config.max_body_bytes))
    statuses = await relay.status.explain_many(cids)
    return JSONResponse({"results": [wire.op_status(s) for s in statuses]})


async def get_pending(request: Request) -> JSONResponse:
    overview = await relay_of(request).status.overview()
    return JSONResponse(wire.pending_overview(overview))


STATUS_ROUTES = [
    Route("/operations/pending", get_pending, methods=["GET"]),
    Route("/operations/status", post_op_statuses, methods=["POST"]),
    Route("/operations/{cid}/status", get_op_status, methods=["GET"]),
]
