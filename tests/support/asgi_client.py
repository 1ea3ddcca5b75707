"""An httpx client that reaches an ASGI app in-process: the one way tests
build it, so a test reads as what it asks of the relay, not how it gets there.

Not checked: lifespans. ``httpx.ASGITransport`` runs none, so the caller
starts the relay itself (``async with relay.running()``) where it needs to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

BASE_URL = "http://relay.test"


@asynccontextmanager
async def asgi_client(
    app: Any, *, client: tuple[str, int] | None = None, base_url: str = BASE_URL
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app``, closed on exit. ``client`` is the (host, port) the
    app sees a request come from; by default httpx's own, on loopback."""
    transport = (
        httpx.ASGITransport(app=app)
        if client is None
        else httpx.ASGITransport(app=app, client=client)
    )
    async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
        yield http
