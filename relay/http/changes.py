"""``GET /changes``: the changes feed over SSE, and over a WebSocket upgrade
of the same path (additive to v0.7.1).

SSE events: ``status``, ``snapshot``, ``op`` (``id`` = the compact progress
token, so ``Last-Event-ID`` resumes exactly), ``eose``, ``error``; a comment
line as heartbeat. Admission failures answer before the stream starts, as a
JSON error with its status (400, 410, 503 + ``Retry-After``).

WebSocket: the client sends ``["CHANGES", subId, filter]`` and
``["CLOSE", subId]``; the relay answers ``["CHANGES", subId, "STATUS" |
"SNAPSHOT" | "EVENT" | "EOSE" | "ERR", ...]``. Several subscriptions share
one socket. A consumer that stays unwritable past the send timeout is closed
(code 4008) with its last delivered token in the close reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from relay.feed import (
    Eose,
    Event,
    FeedBusy,
    FeedError,
    FeedGone,
    FeedMessage,
    FeedRequestError,
    Heartbeat,
    Snapshot,
    Status,
    Subscription,
    filter_from_json,
    filter_from_query,
)

from .context import relay_of

log = logging.getLogger("dfos_relay.feed")

MAX_WS_MESSAGE_BYTES = 64 * 1024
MAX_WS_SUBSCRIPTIONS = 16
MAX_SUB_ID_CHARS = 64
SLOW_CONSUMER_CLOSE = 4008
CLOSE_GRACE_S = 10.0


def bootstrap_url(request: Request | WebSocket) -> str:
    return str(request.url.replace(query="mode=bootstrap", scheme=_http_scheme(request)))


def _http_scheme(request: Request | WebSocket) -> str:
    return {"ws": "http", "wss": "https"}.get(request.url.scheme, request.url.scheme)


def _error_response(exc: FeedError) -> JSONResponse:
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, FeedBusy) else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


def _count_error(request: Request | WebSocket, exc: FeedError) -> None:
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
        _count_error(request, exc)
        return _error_response(exc)
    return EventSourceResponse(
        _sse_events(request, subscription),
        send_timeout=relay.feed.config.send_timeout_s,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _sse_events(request: Request, sub: Subscription) -> AsyncIterator[ServerSentEvent]:
    metrics = relay_of(request).metrics
    with sub:
        metrics.feed_subscribers.labels("sse").inc()
        try:
            async for message in sub.messages():
                event = _sse_event(message, sub)
                if isinstance(message, Event):
                    metrics.feed_delivered(message.entry.seq, sub.feed.hub.known_head)
                yield event
        except TimeoutError:
            metrics.feed_slow_closed.inc()
            log.info("closed a slow SSE consumer at %s", sub.token.compact())
            raise
        except Exception as exc:
            log.warning("changes feed failed: %s", exc)
            yield ServerSentEvent(
                json.dumps({"error": "the feed failed; resume from the last id"}), event="error"
            )
        finally:
            metrics.feed_subscribers.labels("sse").dec()


def _sse_event(message: FeedMessage, sub: Subscription) -> ServerSentEvent:
    if isinstance(message, Event):
        return ServerSentEvent(
            json.dumps(message.to_json()), event="op", id=message.token.compact()
        )
    if isinstance(message, Snapshot):
        return ServerSentEvent(json.dumps(message.item), event="snapshot")
    if isinstance(message, Status):
        return ServerSentEvent(json.dumps(message.to_json()), event="status")
    if isinstance(message, Eose):
        body = {"seq": message.token.seq, "token": message.token.compact()}
        return ServerSentEvent(json.dumps(body), event="eose", id=message.token.compact())
    assert isinstance(message, Heartbeat)
    return ServerSentEvent(comment="heartbeat")


# -- WebSocket -------------------------------------------------------------------


class _Socket:
    """One client socket: its subscriptions, and sends bounded in time."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.relay = relay_of(ws)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.send_lock = asyncio.Lock()
        self.closed = False
        self.done = asyncio.Event()  # set when this socket must close
        self.close_with: tuple[int, str] = (1000, "bye")

    async def send(self, frame: list[Any], sub: Subscription | None = None) -> None:
        async with self.send_lock:
            if self.closed:
                raise WebSocketDisconnect()
            try:
                await asyncio.wait_for(
                    self.ws.send_text(json.dumps(frame)), self.relay.feed.config.send_timeout_s
                )
            except TimeoutError:
                self.relay.metrics.feed_slow_closed.inc()
                token = sub.token.compact() if sub is not None else ""
                self.closed = True
                self.close_with = (SLOW_CONSUMER_CLOSE, f"slow consumer; resume from {token}")
                self.done.set()
                raise WebSocketDisconnect(SLOW_CONSUMER_CLOSE) from None

    async def close(self) -> None:
        """Send the close frame after what is already buffered; bounded."""
        self.closed = True
        code, reason = self.close_with
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(code, reason[:120]), CLOSE_GRACE_S)

    async def run_subscription(self, sub_id: str, sub: Subscription) -> None:
        metrics = self.relay.metrics
        with sub:
            metrics.feed_subscribers.labels("websocket").inc()
            try:
                async for message in sub.messages():
                    frame = _ws_frame(sub_id, message)
                    if frame is None:
                        continue
                    await self.send(frame, sub)
                    if isinstance(message, Event):
                        metrics.feed_delivered(message.entry.seq, sub.feed.hub.known_head)
            except (WebSocketDisconnect, asyncio.CancelledError):
                raise
            except Exception as exc:
                log.warning("changes feed failed: %s", exc)
                with contextlib.suppress(WebSocketDisconnect):
                    await self.send(["CHANGES", sub_id, "ERR", {"error": "the feed failed"}])
            finally:
                metrics.feed_subscribers.labels("websocket").dec()
                self.tasks.pop(sub_id, None)

    async def handle(self, text: str) -> None:
        try:
            if len(text) > MAX_WS_MESSAGE_BYTES:
                raise FeedRequestError(f"message over {MAX_WS_MESSAGE_BYTES} bytes")
            frame = json.loads(text)
        except ValueError:
            await self.send(["NOTICE", "message is not JSON"])
            return
        except FeedRequestError as exc:
            await self.send(["NOTICE", str(exc)])
            return
        if not (isinstance(frame, list) and len(frame) >= 2 and isinstance(frame[1], str)):
            await self.send(["NOTICE", 'expected ["CHANGES", subId, filter] or ["CLOSE", subId]'])
            return
        verb, sub_id = frame[0], frame[1]
        if not 0 < len(sub_id) <= MAX_SUB_ID_CHARS:
            await self.send(["NOTICE", f"subId must be 1..{MAX_SUB_ID_CHARS} characters"])
            return
        if verb == "CLOSE":
            task = self.tasks.pop(sub_id, None)
            if task is not None:
                task.cancel()
            return
        if verb != "CHANGES" or len(frame) != 3:
            await self.send(["NOTICE", f"unknown message {str(verb)[:20]!r}"])
            return
        await self.open(sub_id, frame[2])

    async def open(self, sub_id: str, raw_filter: Any) -> None:
        old = self.tasks.pop(sub_id, None)
        if old is not None:  # a subId reused: the new filter replaces the old one
            old.cancel()
        if len(self.tasks) >= MAX_WS_SUBSCRIPTIONS:
            await self.send(
                ["CHANGES", sub_id, "ERR", {"error": f"at most {MAX_WS_SUBSCRIPTIONS} per socket"}]
            )
            return
        try:
            flt = filter_from_json(raw_filter)
            sub = await self.relay.feed.open(flt, "websocket", bootstrap_url(self.ws))
        except FeedError as exc:
            _count_error(self.ws, exc)
            body = exc.body() | {"status": exc.status}
            await self.send(["CHANGES", sub_id, "ERR", body])
            return
        self.tasks[sub_id] = asyncio.create_task(self.run_subscription(sub_id, sub))

    async def stop(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, Exception):
                await task


def _ws_frame(sub_id: str, message: FeedMessage) -> list[Any] | None:
    if isinstance(message, Event):
        return ["CHANGES", sub_id, "EVENT", message.entry.seq, message.to_json()]
    if isinstance(message, Snapshot):
        return ["CHANGES", sub_id, "SNAPSHOT", message.item]
    if isinstance(message, Status):
        return ["CHANGES", sub_id, "STATUS", message.to_json()]
    if isinstance(message, Eose):
        return ["CHANGES", sub_id, "EOSE", message.token.seq, message.token.compact()]
    return None  # heartbeats: the WebSocket keeps itself alive with pings


async def _receive(ws: WebSocket, socket: _Socket) -> None:
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            await socket.handle(await ws.receive_text())


async def changes_ws(ws: WebSocket) -> None:
    await ws.accept()
    socket = _Socket(ws)
    receiver = asyncio.create_task(_receive(ws, socket))
    closing = asyncio.create_task(socket.done.wait())
    try:
        await asyncio.wait({receiver, closing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (receiver, closing):
            task.cancel()
        await socket.stop()
        if ws.client_state is WebSocketState.CONNECTED:
            await socket.close()
