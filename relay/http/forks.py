"""Fork visibility (additive to v0.7.1; WEB-RELAY.md "Fork Acceptance").

- ``GET /identities/{did}/tips``, ``GET /content/{id}/tips``: every tip
  (nondominated op) of the chain with its createdAt, in head-key order (the
  head last), which one is the head and why (``relay.rules.forks``).
- ``GET /identities/{did}/log?branch=<cid>`` and
  ``GET /content/{id}/log?branch=<cid>``: one branch, genesis first, up to
  and including that op (usually a tip; any op of the chain names the branch
  that ends there). Paged with ``after``/``limit`` like the chain log.
  400 for a ``branch`` that is not an op of this chain, 404 for an unknown
  chain. Without ``branch`` the chain log is served as before.

Each answer reads what it shows, not the chain: the tips (``read_chain_tips``)
or one window of the branch with its length (``read_branch``), bounded by the
log head seq read just before: a consistent snapshot while ingestion goes on.
"""

from __future__ import annotations

from typing import Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from relay.protocol import is_cid
from relay.rules.forks import tips_of
from stores.base import ChainRecord, FeedEntry, LogEntry, OperationKind, UnknownCursorError
from stores.paging import page_after

from . import proof, wire
from .context import relay_of
from .errors import ApiError
from .params import page_params

ChainKind = Literal["identity", "content"]
_OP_KIND: dict[ChainKind, OperationKind] = {"identity": "identity-op", "content": "content-op"}


async def _tips(
    request: Request, kind: ChainKind, chain_id: str
) -> tuple[ChainRecord, list[FeedEntry]]:
    """The chain and its tips in head-key order (404 when the chain is unknown,
    after read-through, or was purged since: then its record was found but
    none of its ops)."""
    chain = await proof.chain_or_404(request, kind, chain_id)
    store = relay_of(request).store
    head_seq = await store.log_length()
    tips = await store.read_chain_tips(chain_id, _OP_KIND[kind], head_seq)
    if not tips:
        raise ApiError(404, f"{kind} chain not found")
    return chain, tips_of(tips)


async def get_identity_tips(request: Request) -> JSONResponse:
    did = request.path_params["did"]
    _, tips = await _tips(request, "identity", did)
    return JSONResponse({"did": did, **wire.chain_tips(tips)})


async def get_content_tips(request: Request) -> JSONResponse:
    content_id = request.path_params["content_id"]
    chain, tips = await _tips(request, "content", content_id)
    # the chain's one parentless op, the root every tip descends from
    body = {"contentId": content_id, "genesisCID": chain.genesis_cid, **wire.chain_tips(tips)}
    return JSONResponse(body)


async def _branch_log(request: Request, kind: ChainKind, chain_id: str) -> Response:
    branch = request.query_params["branch"]
    if not is_cid(branch):
        raise ApiError(400, "branch must be an operation CID")
    after, limit = page_params(request)
    await proof.chain_or_404(request, kind, chain_id)
    store = relay_of(request).store
    head_seq = await store.log_length()
    try:
        path = await store.read_branch(chain_id, _OP_KIND[kind], branch, head_seq, after, limit)
    except UnknownCursorError:
        return proof.unknown_cursor_response()
    if path is None:
        if not await store.read_chain_tips(chain_id, _OP_KIND[kind], head_seq):
            raise ApiError(404, f"{kind} chain not found")  # purged since
        raise ApiError(400, f"branch {branch} is not an operation of this {kind} chain")
    window = [LogEntry(op.cid, op.jws_token, op.kind, op.chain_id, op.seq) for op in path.entries]
    page = page_after(window, limit, has_more=path.start + limit < path.length)
    return JSONResponse({**wire.chain_log(page), "branch": branch})


async def get_identity_log(request: Request) -> Response:
    if "branch" in request.query_params:
        return await _branch_log(request, "identity", request.path_params["did"])
    return await proof.get_identity_log(request)


async def get_content_log(request: Request) -> Response:
    if "branch" in request.query_params:
        return await _branch_log(request, "content", request.path_params["content_id"])
    return await proof.get_content_log(request)


FORK_ROUTES = [
    Route("/identities/{did}/tips", get_identity_tips, methods=["GET"]),
    Route("/content/{content_id}/tips", get_content_tips, methods=["GET"]),
]
