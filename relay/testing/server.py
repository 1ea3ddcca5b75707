"""Serve an ASGI app with hypercorn on loopback, for tests and benchmarks."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from hypercorn.asyncio import serve
from hypercorn.config import Config


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serve_on_loopback(
    app: Any, port: int | None = None, *, ping_interval_s: float | None = None
) -> AsyncIterator[str]:
    """Run ``app`` (lifespan included) on 127.0.0.1; yields its base URL.

    ``port`` (default: a free one) lets a mesh know its peers' URLs up front;
    ``ping_interval_s`` has each WebSocket pinged, as ``dfos-relay serve`` does.
    """
    port = port or free_port()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.websocket_ping_interval = ping_interval_s
    config.accesslog = None
    config.errorlog = None
    shutdown = asyncio.Event()
    task = asyncio.create_task(serve(app, config, shutdown_trigger=shutdown.wait))  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_until_listening(port, task)
        yield url
    finally:
        shutdown.set()
        await asyncio.wait_for(task, timeout=10)


async def _wait_until_listening(port: int, task: asyncio.Task[Any]) -> None:
    for _ in range(200):
        if task.done():
            task.result()
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise TimeoutError(f"hypercorn did not start listening on port {port}")


async def wait_for_relay(url: str, timeout_s: float = 20.0) -> None:
    """Until a relay started elsewhere (another process) answers at ``url``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as http:
        while True:
            try:
                if (await http.get(url + "/.well-known/dfos-relay")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"no relay answered at {url}")
            await asyncio.sleep(0.05)
