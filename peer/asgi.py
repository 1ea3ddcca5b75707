"""``AsgiMeshTransport``: one httpx transport that routes each request, by
its base URL, to one of several in-process ASGI apps.

Tests build a mesh of real relays and give each relay an ``HttpPeerClient``
over this transport: the peers talk HTTP semantics without sockets. A URL
with no mounted app (or one taken ``down``) fails like a refused connection,
so partitions are ``down(url)`` / ``up(url)``.

Not checked: lifespans. ``httpx.ASGITransport`` does not run them, so start
each relay yourself (``async with relay.running()``).
"""

from __future__ import annotations

from typing import Any

import httpx


def _origin(url: httpx.URL) -> str:
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


class AsgiMeshTransport(httpx.AsyncBaseTransport):
    def __init__(self, apps: dict[str, Any] | None = None) -> None:
        self._transports: dict[str, httpx.ASGITransport] = {}
        self._down: set[str] = set()
        for url, app in (apps or {}).items():
            self.mount(url, app)

    def mount(self, base_url: str, app: Any) -> None:
        self._transports[_origin(httpx.URL(base_url))] = httpx.ASGITransport(app=app)

    def unmount(self, base_url: str) -> None:
        self._transports.pop(_origin(httpx.URL(base_url)), None)

    def down(self, base_url: str) -> None:
        """Requests to ``base_url`` fail as unreachable until ``up``."""
        self._down.add(_origin(httpx.URL(base_url)))

    def up(self, base_url: str) -> None:
        self._down.discard(_origin(httpx.URL(base_url)))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = _origin(request.url)
        transport = self._transports.get(origin)
        if transport is None or origin in self._down:
            raise httpx.ConnectError(f"no app reachable at {origin}", request=request)
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()
