"""A hostile reconciliation responder for tests: a real Starlette app on
loopback that answers ``POST /sync/negentropy`` with whatever ``reply``
makes of each message, ``POST /sync/operations`` with ``operations``
(by default: every cid missing) and, given ``submit``, ``POST /operations``
with the results it makes of each pushed batch. Also the message shapes such a peer
sends: an id list over everything, a random fingerprint, and a flood of
fabricated ids that fills a frame and keeps the exchange going."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from relay.protocol.negentropy import INFINITY, Bound, Mode, encode_varint
from relay.protocol.negentropy.wire import ID_SIZE, BoundWriter
from relay.testing.server import serve_on_loopback

Reply = Callable[[bytes], Awaitable[bytes]]
Operations = Callable[[list[str]], dict[str, object]]
Submit = Callable[[list[str]], list[dict[str, object]]]


def id_list(ids: list[bytes]) -> bytes:
    body = BoundWriter().encode(Bound(INFINITY)) + encode_varint(Mode.ID_LIST)
    return b"\x61" + body + encode_varint(len(ids)) + b"".join(ids)


def lacks_everything() -> bytes:
    """The reply of a peer that holds nothing: an empty id list over
    everything, so every id of ours is one it lacks."""
    return id_list([])


def random_fingerprint() -> bytes:
    return (
        b"\x61"
        + BoundWriter().encode(Bound(INFINITY))
        + encode_varint(Mode.FINGERPRINT)
        + os.urandom(16)
    )


def flood(frame_limit: int) -> bytes:
    """As many fabricated ids as ``frame_limit`` allows, then a random
    fingerprint over the rest, so the initiator always asks again."""
    writer = BoundWriter()
    head = b"\x61" + writer.encode(Bound(1)) + encode_varint(Mode.ID_LIST)
    tail = writer.encode(Bound(INFINITY)) + encode_varint(Mode.FINGERPRINT) + os.urandom(16)
    count = (frame_limit - len(head) - len(tail) - 8) // ID_SIZE
    return head + encode_varint(count) + os.urandom(ID_SIZE * count) + tail


@asynccontextmanager
async def hostile(
    reply: Reply, operations: Operations | None = None, submit: Submit | None = None
) -> AsyncIterator[str]:
    async def negentropy(request: Request) -> Response:
        return Response(await reply(await request.body()), media_type="application/octet-stream")

    async def fetch(request: Request) -> JSONResponse:
        cids = (await request.json())["cids"]
        body = operations(cids) if operations else {"operations": [], "missing": cids}
        return JSONResponse(body)

    async def pushed(request: Request) -> JSONResponse:
        assert submit is not None
        return JSONResponse({"results": submit((await request.json())["operations"])})

    routes = [
        Route("/sync/negentropy", negentropy, methods=["POST"]),
        Route("/sync/operations", fetch, methods=["POST"]),
    ]
    if submit is not None:
        routes.append(Route("/operations", pushed, methods=["POST"]))
    app = Starlette(routes=routes)
    async with serve_on_loopback(app) as url:
        yield url
