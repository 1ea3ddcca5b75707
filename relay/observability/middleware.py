"""Request context middleware (pure ASGI): request ids, latency, access log.

An incoming ``X-Request-ID`` is honoured when it is short printable ASCII,
otherwise a fresh one is generated; either way it is echoed on the response
and bound to the logging context for the request's duration. Latency is
labelled by the matched route template (``/operations/{cid}``), never by
the raw path, and by the method only when it is a standard one (a client
may send any token as a method), so label cardinality stays bounded.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from .logging import REQUEST_ID_HEADER, bind_request_id, reset_request_id
from .metrics import RelayMetrics

MAX_REQUEST_ID_LENGTH = 128
UNMATCHED_ROUTE = "unmatched"
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}
)
OTHER_METHOD = "other"

access_log = logging.getLogger("dfos_relay.access")


def accept_request_id(raw: bytes | None) -> str:
    if raw:
        text = raw.decode("latin-1")
        # ASCII only: the id is echoed UTF-8 encoded, which alters any other byte
        if (
            len(text) <= MAX_REQUEST_ID_LENGTH
            and text.isascii()
            and text.isprintable()
            and " " not in text
        ):
            return text
    return uuid.uuid4().hex


class RequestContextMiddleware:
    def __init__(self, app: Any, metrics: RelayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        request_id = accept_request_id(headers.get(REQUEST_ID_HEADER.encode()))
        token = bind_request_id(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", ()),
                    (REQUEST_ID_HEADER.encode(), request_id.encode()),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", UNMATCHED_ROUTE)
            method = scope["method"] if scope["method"] in KNOWN_METHODS else OTHER_METHOD
            self.metrics.observe_request(method, route, status, elapsed)
            access_log.info(
                "%s %s %d",
                scope["method"],
                scope["path"],
                status,
                extra={"status": status, "duration_ms": round(elapsed * 1000, 2)},
            )
            reset_request_id(token)
