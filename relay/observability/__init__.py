"""Operating the relay: structured logs with request ids, health and
readiness probes, Prometheus metrics (issue 7 "Operations"). The operator
routes that serve them live in ``relay.http.ops``.

Everything here observes; nothing here changes what the relay accepts.
The metrics and the middleware load on first use, so what only needs the
log levels (``relay.settings``, and with it every ``dfos-relay`` command
line) does not pull in prometheus_client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .logging import REQUEST_ID_HEADER, JsonFormatter, configure_logging, current_request_id

if TYPE_CHECKING:
    from .metrics import RelayMetrics
    from .middleware import RequestContextMiddleware

__all__ = [
    "REQUEST_ID_HEADER",
    "JsonFormatter",
    "RelayMetrics",
    "RequestContextMiddleware",
    "configure_logging",
    "current_request_id",
]

_LAZY = {
    "RelayMetrics": "relay.observability.metrics",
    "RequestContextMiddleware": "relay.observability.middleware",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'relay.observability' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
