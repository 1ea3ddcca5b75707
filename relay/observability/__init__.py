"""Operating the relay: structured logs with request ids, health and
readiness probes, Prometheus metrics (issue 7 "Operations"). The operator
routes that serve them live in ``relay.http.ops``.

Everything here observes; nothing here changes what the relay accepts.
"""

from .logging import REQUEST_ID_HEADER, JsonFormatter, configure_logging, current_request_id
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
