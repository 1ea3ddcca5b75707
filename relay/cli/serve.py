"""``dfos-relay serve``: run the relay under hypercorn until SIGTERM/SIGINT.

Graceful shutdown: on the signal hypercorn stops accepting connections and
gives in-flight requests ``DEFAULT_GRACEFUL_TIMEOUT_S`` to finish (a batch
being ingested holds the ingest lock and commits in one transaction, so it
lands entirely or not at all); then the lifespan stops the relay, whose
``peering.stop()`` flushes the gossip queue, and closes the store.

The listening sockets are made here, before anything starts, so a taken
port or an unresolvable host is one line naming the address. One worker
serves the app built here in-process. Several workers are supervised here
rather than by ``hypercorn.run``: each imports ``relay.asgi:app`` (configured
by the merged ``DFOS_RELAY_*`` environment handed down), a worker that
cannot start reports one line and makes the command fail, and the others
are stopped.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import sys
from multiprocessing.connection import wait
from multiprocessing.context import SpawnProcess
from typing import Any

from hypercorn.config import Config, Sockets

from relay.asgi import failure_line
from relay.settings import DEFAULT_GRACEFUL_TIMEOUT_S, ServeSettings

ASGI_APP_PATH = "relay.asgi:app"
WORKER_START_FAILED = 3

log = logging.getLogger("dfos_relay.serve")


class ServeError(Exception):
    """A start-up failure, already phrased as the one line to print."""


def hypercorn_config(settings: ServeSettings) -> Config:
    config = Config()
    config.bind = [f"{settings.host}:{settings.port}"]
    if settings.metrics_port is not None:
        config.bind.append(f"{settings.host}:{settings.metrics_port}")
    config.accesslog = None  # the request middleware logs each request as JSON
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = DEFAULT_GRACEFUL_TIMEOUT_S
    config.workers = settings.workers
    # ASGI cannot ping: hypercorn pings each WebSocket at the feed's heartbeat,
    # the counterpart of the SSE heartbeat (quiet subscriptions stay alive
    # behind proxies, and changes_ws closes a client that answers none)
    config.websocket_ping_interval = settings.feed_heartbeat_s
    return config


def listen(config: Config, settings: ServeSettings) -> Sockets:
    """The bound sockets, or a ``ServeError`` that names the address."""
    try:
        return config.create_sockets()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        ports = f"{settings.port}" + (
            f" (metrics {settings.metrics_port})" if settings.metrics_port else ""
        )
        raise ServeError(f"cannot listen on {settings.host}:{ports}: {reason}") from None


def _close(sockets: Sockets) -> None:
    for sock in (*sockets.secure_sockets, *sockets.insecure_sockets, *sockets.quic_sockets):
        sock.close()


async def _serve_one(app: Any, config: Config, sockets: Sockets) -> None:
    from hypercorn.asyncio.run import worker_serve
    from hypercorn.utils import wrap_app

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    wrapped = wrap_app(app, config.wsgi_max_body_size, None)
    await worker_serve(wrapped, config, sockets=sockets, shutdown_trigger=stop.wait)
    log.info("stopped")


def _worker(config: Config, sockets: Sockets, shutdown: Any, failures: Any, index: int) -> None:
    """A worker process: hypercorn's asyncio worker, failing in one line."""
    from hypercorn.asyncio.run import asyncio_worker

    from relay.observability.logging import configure_logging

    configure_logging(os.environ.get("DFOS_RELAY_LOG_LEVEL", "info"))
    try:
        asyncio_worker(config, sockets, shutdown)
    except Exception as exc:  # reported as one line, then the process fails
        line = failure_line(exc)
        failures.put((index, line))
        log.error("worker %d failed to start: %s", index, line)
        sys.exit(WORKER_START_FAILED)


def _exit_text(code: int | None) -> str:
    """How a process ended: a signal by name (``multiprocessing`` gives -N)."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _serve_workers(config: Config, sockets: Sockets) -> None:
    ctx = multiprocessing.get_context("spawn")
    shutdown = ctx.Event()
    failures = ctx.SimpleQueue()
    stopping = False

    def on_signal(*_: Any) -> None:
        nonlocal stopping
        stopping = True
        shutdown.set()

    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    processes: list[SpawnProcess] = []
    try:
        config.application_path = ASGI_APP_PATH
        for index in range(config.workers):
            process = ctx.Process(
                target=_worker, args=(config, sockets, shutdown, failures, index), daemon=False
            )
            process.start()
            processes.append(process)
        for sig in previous:
            signal.signal(sig, on_signal)
        failed: SpawnProcess | None = None
        alive = list(processes)
        while alive:
            done = wait([p.sentinel for p in alive], timeout=0.5)
            for process in [p for p in alive if p.sentinel in done]:
                process.join()
                alive.remove(process)
                if process.exitcode != 0 and not stopping and failed is None:
                    failed = process
                    shutdown.set()  # one worker down: stop the others, fail
        if failed is not None:
            reason = failures.get() if not failures.empty() else None
            if reason is not None:
                raise ServeError(f"a worker could not start: {reason[1]}")
            # no start-up failure reported: it was serving, then died
            index = processes.index(failed)
            raise ServeError(f"worker {index} stopped: {_exit_text(failed.exitcode)}")
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _close(sockets)


def serve(settings: ServeSettings, app: Any, worker_env: dict[str, str]) -> int:
    """Serve until a signal; raise ``ServeError`` when serving cannot start."""
    config = hypercorn_config(settings)
    sockets = listen(config, settings)
    if settings.workers == 1:
        try:
            asyncio.run(_serve_one(app, config, sockets))
        except Exception as exc:
            raise ServeError(failure_line(exc)) from None
        finally:
            _close(sockets)
        return 0
    os.environ.update(worker_env)
    _serve_workers(config, sockets)
    return 0
