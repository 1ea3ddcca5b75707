"""Query-parameter parsing: reject bad values instead of guessing."""

from __future__ import annotations

from starlette.requests import Request

from relay.config import DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT
from relay.protocol import is_cid
from relay.protocol.untrusted import ascii_decimal
from relay.scope import Scope, ScopeError, parse_scope

from .errors import ApiError


def page_params(request: Request) -> tuple[str | None, int]:
    """``after`` (a CID) and ``limit`` (1..1000, default 100)."""
    after = request.query_params.get("after")
    if after is not None and not is_cid(after):
        raise ApiError(400, "after must be an operation CID")
    raw = request.query_params.get("limit")
    if raw is None:
        return after, DEFAULT_LOG_LIMIT
    limit = ascii_decimal(raw)
    if limit is None:
        raise ApiError(400, "limit must be a positive integer")
    if not 1 <= limit <= MAX_LOG_LIMIT:
        raise ApiError(400, f"limit must be between 1 and {MAX_LOG_LIMIT}")
    return after, limit


def scope_param(request: Request) -> Scope | None:
    """The additive ``scope`` query parameter (DIDs and contentIds), or 400."""
    values = request.query_params.getlist("scope")
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(400, "scope is given twice; members are comma-separated")
    try:
        return parse_scope(values[0])
    except ScopeError as exc:
        raise ApiError(400, f"scope: {exc}") from None


async def read_body_capped(request: Request, cap: int) -> bytes:
    """The request body, or 413 once it exceeds ``cap`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and (ascii_decimal(declared) or 0) > cap:
        raise ApiError(413, f"request body exceeds {cap} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise ApiError(413, f"request body exceeds {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
