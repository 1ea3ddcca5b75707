"""``dfos-relay serve``: run the relay under hypercorn until SIGTERM/SIGINT.

Graceful shutdown: on the signal hypercorn stops accepting connections and
gives in-flight requests ``DEFAULT_GRACEFUL_TIMEOUT_S`` to finish (a batch
being ingested holds the ingest lock and commits in one transaction, so it
lands entirely or not at all); then the lifespan stops the relay, whose
``peering.stop()`` flushes the gossip queue, and closes the store.

One worker serves the app built here in-process. Several workers each
import ``relay.asgi:app``, configured by the merged ``DFOS_RELAY_*``
environment this process hands down.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

from hypercorn.config import Config

from relay.settings import DEFAULT_GRACEFUL_TIMEOUT_S, ServeSettings

ASGI_APP_PATH = "relay.asgi:app"

log = logging.getLogger("dfos_relay.serve")


def hypercorn_config(settings: ServeSettings) -> Config:
    config = Config()
    config.bind = [f"{settings.host}:{settings.port}"]
    config.accesslog = None  # the request middleware logs each request as JSON
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = DEFAULT_GRACEFUL_TIMEOUT_S
    config.workers = settings.workers
    return config


async def _serve_one(app: Any, config: Config) -> None:
    from hypercorn.asyncio import serve

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
    log.info("stopped")


def serve(settings: ServeSettings, app: Any, worker_env: dict[str, str]) -> int:
    config = hypercorn_config(settings)
    if settings.workers == 1:
        asyncio.run(_serve_one(app, config))
        return 0
    from hypercorn.run import run

    os.environ.update(worker_env)
    config.application_path = ASGI_APP_PATH
    return run(config)
