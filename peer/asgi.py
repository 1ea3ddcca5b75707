"""``AsgiMeshTransport``: one httpx transport that routes each request, by
its base URL, to one of several in-process ASGI apps.

Tests build a mesh of real relays and give each relay an ``HttpPeerClient``
over this transport: the peers talk HTTP semantics without sockets. A URL
with no mounted app (or one taken ``down``) fails like a refused connection,
so partitions are ``down(url)`` / ``up(url)``.

With ``record_posts=True`` every POST /operations is kept in ``posts``
(target, relay push headers, tokens, and the order in which it started and
ended), so tests can count pushes per op and check that none echoes.

Not checked: lifespans. ``httpx.ASGITransport`` does not run them, so start
each relay yourself (``async with relay.running()``).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import httpx

from peer.base import FANOUT_HOP_HEADER, RELAY_SENDER_HEADER, RELAY_SENDER_PROOF_HEADER


def _origin(url: httpx.URL) -> str:
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


@dataclass(slots=True)
class RecordedPost:
    """One POST /operations that went through the transport."""

    target: str  # the receiving relay's origin
    sender: str | None  # RELAY_SENDER_HEADER (a relay DID), None for clients
    hop: str | None  # FANOUT_HOP_HEADER
    tokens: tuple[str, ...]
    started: int  # a transport-wide counter: orders requests
    ended: int = -1  # -1 while in flight (or when it failed)
    status: int = 0
    proof: str | None = None  # RELAY_SENDER_PROOF_HEADER


class AsgiMeshTransport(httpx.AsyncBaseTransport):
    def __init__(self, apps: dict[str, Any] | None = None, *, record_posts: bool = False) -> None:
        self._transports: dict[str, httpx.ASGITransport] = {}
        self._down: set[str] = set()
        self._record = record_posts
        self._clock = itertools.count()
        self.posts: list[RecordedPost] = []
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
        if not (self._record and request.method == "POST" and request.url.path == "/operations"):
            return await transport.handle_async_request(request)
        body = json.loads(request.content or b"{}")
        post = RecordedPost(
            origin,
            request.headers.get(RELAY_SENDER_HEADER),
            request.headers.get(FANOUT_HOP_HEADER),
            tuple(t for t in body.get("operations", ()) if isinstance(t, str)),
            next(self._clock),
            proof=request.headers.get(RELAY_SENDER_PROOF_HEADER),
        )
        self.posts.append(post)
        response = await transport.handle_async_request(request)
        post.status, post.ended = response.status_code, next(self._clock)
        return response

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()
