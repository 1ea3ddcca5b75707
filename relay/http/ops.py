"""Operator routes: ``/healthz`` (process up), ``/readyz`` (store reachable
and undamaged, sequencer running) and ``/metrics`` (Prometheus text format).

``/readyz`` answers 200 ``{"status": "ready", ...}`` or 503 with each check
(``store``: ``unreachable`` or ``damaged``; ``sequencer``: ``stopped``) and
an ``error`` naming them. What "damaged" covers is the store's ``ping``
(a SQLite file read anew per probe: ``stores.sqlite_probe``).

``/healthz`` never touches the store, so a slow database does not get a
live process restarted; ``/readyz`` does, so a load balancer stops routing
to a relay that cannot serve. Neither waits on a store that does not
answer (a hung connection, a partitioned database): ``/readyz`` says
unavailable after ``READY_TIMEOUT_S``, ``/metrics`` answers its in-memory
series after ``METRICS_STORE_TIMEOUT_S``. The store call is not cancelled
then (the cancel would wait for asyncpg's shielded connection release,
itself stuck): it runs on, and the next probes wait on it rather than start
another, so a hung store holds one call per kind, not one per probe.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from relay.observability.metrics import CONTENT_TYPE
from stores.base import StoreDamaged

from .context import relay_of

if TYPE_CHECKING:
    from relay.engine import Relay

log = logging.getLogger("dfos_relay.ops")

READY_TIMEOUT_S = 2.0  # under the usual probe timeouts, above any sane SELECT 1
METRICS_STORE_TIMEOUT_S = 5.0  # under Prometheus' default 10 s scrape timeout


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    relay = relay_of(request)
    checks = {"sequencer": "running" if relay.started else "stopped", "store": "ok"}
    try:
        if not await _bounded(request, "store_ping", relay.store.ping, READY_TIMEOUT_S):
            log.warning("readiness: store did not answer within %gs", READY_TIMEOUT_S)
            checks["store"] = "unreachable"
    except StoreDamaged as exc:
        log.error("readiness: the store is damaged: %s", exc)
        checks["store"] = "damaged"
    except Exception as exc:  # any failure means "not ready", never a 500
        log.warning("readiness: store ping failed: %s", exc)
        checks["store"] = "unreachable"
    if checks == {"sequencer": "running", "store": "ok"}:
        return JSONResponse({"status": "ready", **checks})
    # the spec's error shape beside the checks; the details (a file path)
    # are in the log, not in a public answer
    reasons = [_REASONS[value] for value in checks.values() if value in _REASONS]
    return JSONResponse(
        {"status": "unavailable", **checks, "error": "; ".join(reasons)}, status_code=503
    )


_REASONS = {
    "stopped": "the relay is not running",
    "unreachable": "the store does not answer",
    "damaged": "the store's data is damaged (see the relay's log)",
}


async def _bounded(
    request: Request,
    key: str,
    start: Callable[[], Coroutine[Any, Any, None]],
    timeout_s: float,
) -> bool:
    """Await the app's in-flight ``key`` call (or a new ``start()``) up to
    ``timeout_s``: True when it is done (its error raised), False if not yet."""
    state = request.app.state
    task: asyncio.Task[None] | None = getattr(state, key, None)
    if task is None or task.done():
        task = asyncio.create_task(start(), name=f"ops {key}")
        task.add_done_callback(_retrieve)  # a late failure is not "never retrieved"
        setattr(state, key, task)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if done:
        task.result()
    return bool(done)


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


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
            refresh = functools.partial(_refresh_store_gauges, relay)
            if not await _bounded(request, "metrics_refresh", refresh, METRICS_STORE_TIMEOUT_S):
                log.warning("metrics: store did not answer within %gs", METRICS_STORE_TIMEOUT_S)
        except Exception as exc:  # a scrape still answers the in-memory series
            log.warning("metrics: store gauges unavailable: %s", exc)
    return Response(relay.metrics.render(), media_type=CONTENT_TYPE)


async def _refresh_store_gauges(relay: Relay) -> None:
    await relay.metrics.refresh(relay.store)
    overview = await relay.status.overview()
    by_dependency = {kind: ages.count for kind, ages in overview.by_dependency.items()}
    relay.metrics.set_pending(
        {**by_dependency, "none": overview.unverified, "copy": overview.copies},
        overview.oldest_age_s,
    )
    relay.metrics.links.update(relay.peer_links())


OPS_ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
