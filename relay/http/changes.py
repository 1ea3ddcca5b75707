"""``GET /changes``: the changes feed over SSE (additive to v0.7.1); the
WebSocket upgrade of the same path is ``changes_ws``.

SSE events: ``status``, ``snapshot``, ``op`` (``id`` = the compact progress
token, so ``Last-Event-ID`` resumes exactly), ``eose``, ``error``; a comment
line as heartbeat. Admission failures answer before the stream starts, as a
JSON error with its status (400, 410, 503 + ``Retry-After``); a live stream
whose epoch changes ends with an ``error`` event carrying the 410 body and
``"status": 410``.

Events are framed by sse-starlette's ``ServerSentEvent``; op events once
per event for all subscribers (the feed's shared cache), sent several per
write by ``SseStream``. A consumer whose send waits past the send timeout
is cut and counted as too slow; it resumes from its ``Last-Event-ID``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from urllib.parse import urlencode

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket

from relay.feed import (
    Eose,
    Event,
    Events,
    FeedBusy,
    FeedError,
    FeedGone,
    FeedMessage,
    Heartbeat,
    Snapshot,
    Status,
    Subscription,
    filter_from_query,
)

from .context import relay_of
from .sse_stream import SseStream

log = logging.getLogger("dfos_relay.feed")

MAX_SSE_CHUNK = 256 * 1024  # op events joined per write: few writes, bounded buffers


# what a bootstrap keeps of the request: its filter (not its position or mode)
_FILTER_PARAMS = ("kinds", "authors", "chains", "scope", "live")


def bootstrap_url(request: Request | WebSocket) -> str:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k in _FILTER_PARAMS]
    query = urlencode([("mode", "bootstrap"), *kept])
    return str(request.url.replace(query=query, scheme=_http_scheme(request)))


def _http_scheme(request: Request | WebSocket) -> str:
    return {"ws": "http", "wss": "https"}.get(request.url.scheme, request.url.scheme)


def _error_response(exc: FeedError) -> JSONResponse:
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, FeedBusy) else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


def count_error(request: Request | WebSocket, exc: FeedError) -> None:
    if isinstance(exc, FeedGone):
        relay_of(request).metrics.feed_gone.inc()


# -- SSE -------------------------------------------------------------------------


async def changes_sse(request: Request) -> Response:
    relay = relay_of(request)
    try:
        flt = filter_from_query(
            request.query_params.multi_items(), request.headers.get("last-event-id")
        )
        subscription = await relay.feed.open(flt, "sse", bootstrap_url(request))
    except FeedError as exc:
        count_error(request, exc)
        return _error_response(exc)
    metrics = relay.metrics

    def on_slow() -> bytes:
        """The stalled stream's last event: where to resume (as the WebSocket's ERR)."""
        metrics.feed_slow_closed.inc()
        token = subscription.token
        log.info("closed a slow SSE consumer at %s", token.compact())
        body = {
            "error": "slow consumer: the stream stayed unwritable; resume from token",
            "status": 408,
            "token": token.compact(),
            "seq": token.seq,
        }
        return ServerSentEvent(json.dumps(body), event="error").encode()

    return SseStream(_sse_chunks(request, subscription), relay.feed.config.send_timeout_s, on_slow)


async def _sse_chunks(request: Request, sub: Subscription) -> AsyncIterator[bytes]:
    """The stream as bytes: op events come pre-framed from the feed's shared
    cache and go out several per send (one send per chunk, not per event)."""
    metrics = relay_of(request).metrics
    with sub:
        metrics.feed_subscribers.labels("sse").inc()
        try:
            async for message in sub.messages():
                if not isinstance(message, Events):
                    yield _sse_event(message).encode()
                    continue
                chunks = sub.feed.cache.chunks("sse", message.events, _sse_op, MAX_SSE_CHUNK)
                for chunk in chunks:
                    yield chunk.data
                    sub.passed(chunk.last.seq)
                    metrics.feed_delivered(chunk.last.seq, sub.feed.hub.known_head, chunk.events)
        except FeedError as exc:  # the epoch changed under a live follow: bootstrap again
            count_error(request, exc)
            body = exc.body() | {"status": exc.status}
            yield ServerSentEvent(json.dumps(body), event="error").encode()
        except Exception as exc:
            log.warning("changes feed failed: %s", exc)
            yield _sse_event(message=None).encode()
        finally:
            metrics.feed_subscribers.labels("sse").dec()


def _sse_op(event: Event) -> bytes:
    return ServerSentEvent(event.json, event="op", id=event.token.compact()).encode()


def _sse_event(message: FeedMessage | None) -> ServerSentEvent:
    if isinstance(message, Snapshot):
        return ServerSentEvent(json.dumps(message.item), event="snapshot")
    if isinstance(message, Status):
        return ServerSentEvent(json.dumps(message.to_json()), event="status")
    if isinstance(message, Eose):
        body = {"seq": message.token.seq, "token": message.token.compact()}
        return ServerSentEvent(json.dumps(body), event="eose", id=message.token.compact())
    if isinstance(message, Heartbeat):
        return ServerSentEvent(comment="heartbeat")
    return ServerSentEvent(
        json.dumps({"error": "the feed failed; resume from the last id"}), event="error"
    )
