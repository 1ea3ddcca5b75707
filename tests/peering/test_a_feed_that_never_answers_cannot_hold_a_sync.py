"""Finding a peer's log head through its changes feed (the cursor a gap
repair starts from) has the request deadline: a feed that sends heartbeats
and never the op cannot hold the sync cycle that asked (it holds the sync
lock)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from peer import PeerLimits
from peer.sync_http import HttpSyncClient
from relay.testing.server import serve_on_loopback


async def well_known(request: Request) -> JSONResponse:
    return JSONResponse({"changesFeed": {"epoch": "e1", "minSeq": 1, "headSeq": 5}})


async def heartbeats(request: Request) -> StreamingResponse:
    async def forever() -> AsyncIterator[bytes]:
        while True:
            yield b": still here\n\n"
            await asyncio.sleep(0.1)

    return StreamingResponse(forever(), media_type="text/event-stream")


async def test_a_feed_that_only_sends_heartbeats_gives_no_head_within_the_deadline() -> None:
    app = Starlette(
        routes=[
            Route("/.well-known/dfos-relay", well_known),
            Route("/changes", heartbeats),
        ]
    )
    async with serve_on_loopback(app) as url:
        client = HttpSyncClient(limits=PeerLimits(read_timeout_s=1.0, request_deadline_s=1.0))
        started = time.perf_counter()
        try:
            head = await asyncio.wait_for(client.log_head_cid(url), 20)
        finally:
            await client.aclose()
    assert head is None
    assert time.perf_counter() - started < 5
