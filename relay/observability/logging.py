"""Structured JSON logs: one object per line on stderr, carrying the id of
the request being served (``X-Request-ID``) when there is one.

Fields: ``ts`` (ISO 8601 UTC), ``level``, ``logger``, ``msg``, ``request_id``
(if any), ``exc`` (formatted traceback, if any) and any ``extra={...}``
values a caller passes.

Values may quote a client (a request path), so a line holds no character a
reader could take for a line break or a terminal control: JSON escapes
C0 controls, and the line escapes DEL, the C1 controls (NEL among them)
and U+2028/U+2029 as well.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

REQUEST_ID_HEADER = "x-request-id"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
DEFAULT_LOG_LEVEL = "info"

_request_id: ContextVar[str | None] = ContextVar("dfos_relay_request_id", default=None)
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_ESCAPES = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), 0x2028, 0x2029)}


def current_request_id() -> str | None:
    return _request_id.get()


def bind_request_id(request_id: str | None) -> Any:
    """Set the request id of the current context; returns the reset token."""
    return _request_id.set(request_id)


def reset_request_id(token: Any) -> None:
    _request_id.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = current_request_id()
        if request_id is not None:
            entry["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False).translate(_ESCAPES)


def configure_logging(level: str = DEFAULT_LOG_LEVEL) -> None:
    """Route the root logger (and hypercorn's) to JSON lines on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("hypercorn.error", "hypercorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
