"""The audit trail: one structured log line per admin action.

Lines go to the ``dfos_relay.audit`` logger at INFO, whose own level is
pinned to INFO so that lowering the relay's log level (also through
``/admin/log-level``) never silences them. Each line carries ``audit: true``,
``action``, ``admin`` (the operator DID, or null for a refused call),
``outcome`` (``ok``, ``refused`` or ``failed``), the request id (from the
logging context) and the action's own fields. Field names avoid the log
line's own keys (``level``, ``msg``, ...).
"""

from __future__ import annotations

import logging
from typing import Any

AUDIT_LOGGER = "dfos_relay.audit"
# the JSON line's own keys, and LogRecord's attributes (``extra`` may not set them)
_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {
    "ts", "level", "logger", "msg", "request_id", "exc", "message", "asctime",
}  # fmt: skip

log = logging.getLogger(AUDIT_LOGGER)


def audit(action: str, admin: str | None, outcome: str, **fields: Any) -> None:
    if log.level != logging.INFO:
        log.setLevel(logging.INFO)
    extra = {f"x_{k}" if k in _RESERVED else k: v for k, v in fields.items()}
    extra.update(audit=True, action=action, admin=admin, outcome=outcome)
    log.info("admin %s: %s", action, outcome, extra=extra)
