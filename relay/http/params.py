"""Query-parameter parsing: reject bad values instead of guessing."""

from __future__ import annotations

import asyncio

from starlette.requests import ClientDisconnect, Request

from relay.config import DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT
from relay.protocol import is_cid
from relay.protocol.untrusted import ascii_decimal
from relay.receive_budget import ReceiveBusy, Reservation
from relay.scope import Scope, ScopeError, parse_scope

from .context import relay_of
from .errors import ApiError


def page_params(request: Request) -> tuple[str | None, int]:
    """``after`` (a CID) and ``limit`` (1..1000, default 100)."""
    after = request.query_params.get("after")
    if after is not None and not is_cid(after):
        raise ApiError(400, "after must be an operation CID")
    return after, limit_param(request)


def limit_param(request: Request, default: int = DEFAULT_LOG_LIMIT) -> int:
    """``limit`` (1..1000, ``default`` when absent)."""
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    limit = ascii_decimal(raw)
    if limit is None:
        raise ApiError(400, "limit must be a positive integer")
    if not 1 <= limit <= MAX_LOG_LIMIT:
        raise ApiError(400, f"limit must be between 1 and {MAX_LOG_LIMIT}")
    return limit


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
    """The request body, or 413 once it exceeds ``cap`` bytes, or 408 once it
    falls behind its deadline (``_read_body``): a body trickled in a byte at
    a time would hold its connection forever (hypercorn bounds slow headers,
    not slow bodies), and its bytes in the receive budget.

    The body holds what it received in the relay's receive budget while it
    arrives (``relay.receive_budget``), and is refused at once when its
    Content-Length does not fit beside what is held; over the budget,
    ``ReceiveBusy`` (a 503)."""
    declared_text = request.headers.get("content-length")
    declared = None if declared_text is None else (ascii_decimal(declared_text) or 0)
    if declared is not None and declared > cap:
        raise ApiError(413, f"request body exceeds {cap} bytes")
    relay = relay_of(request)
    try:
        with relay.receiving.reserving() as reservation:
            if declared is not None:
                reservation.admit(declared)
            return await _read_body(request, cap, reservation)
    except ReceiveBusy:  # answered 503 (relay.http.errors); counted here
        relay.metrics.receive_budget_refused()
        raise


async def _read_body(request: Request, cap: int, reservation: Reservation) -> bytes:
    """The body, against its deadline: ``body_grace_s`` from the start, moved
    one second later per ``body_min_rate`` bytes received but never more than
    the grace ahead of now. Sending fast banks no more than the grace: with
    no bound, a body sent fast and then stalled (or trickled) held its
    connection, and what it received in the budget, for a second per
    ``body_min_rate`` bytes it had sent (4 MiB: over an hour at 1 KiB/s).
    Steady at the minimum rate or above, a body is read however long it takes."""
    config = relay_of(request).config
    grace_s, min_rate = config.body_grace_s, config.body_min_rate
    chunks: list[bytes] = []
    size = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    stream = request.stream()
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    chunk = await anext(stream)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise ApiError(408, "the request body arrived too slowly") from None
            size += len(chunk)
            if size > cap:
                raise ApiError(413, f"request body exceeds {cap} bytes")
            reservation.take(len(chunk))
            chunks.append(chunk)
            deadline = min(deadline + len(chunk) / min_rate, loop.time() + grace_s)
    except ClientDisconnect:  # nobody reads the answer; not a server error either
        raise ApiError(400, "the client disconnected before its body was complete") from None
    finally:
        await stream.aclose()
    return b"".join(chunks)
