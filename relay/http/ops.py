"""Operator routes: ``/healthz`` (process up), ``/readyz`` (store reachable
and sequencer running) and ``/metrics`` (Prometheus text format).

``/healthz`` never touches the store, so a slow database does not get a
live process restarted; ``/readyz`` does, so a load balancer stops routing
to a relay that cannot serve.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from relay.observability.metrics import CONTENT_TYPE

from .context import relay_of

log = logging.getLogger("dfos_relay.ops")


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    relay = relay_of(request)
    checks = {"sequencer": "running" if relay.started else "stopped", "store": "ok"}
    try:
        await relay.store.ping()
    except Exception as exc:  # any failure means "not ready", never a 500
        log.warning("readiness: store ping failed: %s", exc)
        checks["store"] = "unreachable"
    ready = checks == {"sequencer": "running", "store": "ok"}
    return JSONResponse(
        {"status": "ready" if ready else "unavailable", **checks}, status_code=200 if ready else 503
    )


def _local_port(request: Request) -> int | None:
    server = request.scope.get("server")
    return int(server[1]) if server and server[1] is not None else None


async def metrics(request: Request) -> Response:
    relay = relay_of(request)
    port = relay.config.metrics_port
    if port is not None and _local_port(request) != port:
        # Kept off the published API port: the operator scrapes the metrics port.
        return JSONResponse({"error": "not found"}, status_code=404)
    if relay.started:
        try:
            await relay.metrics.refresh(relay.store)
            overview = await relay.status.overview()
            by_dependency = {kind: ages.count for kind, ages in overview.by_dependency.items()}
            relay.metrics.set_pending(
                {**by_dependency, "none": overview.unverified, "copy": overview.copies},
                overview.oldest_age_s,
            )
            relay.metrics.links.update(relay.peer_links())
        except Exception as exc:  # a scrape still answers the in-memory series
            log.warning("metrics: store gauges unavailable: %s", exc)
    return Response(relay.metrics.render(), media_type=CONTENT_TYPE)


OPS_ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
