"""Against a peer without ``POST /sync/operations`` (a v0.7.1 relay) the
sync client fetches ops one ``GET /operations/{cid}`` at a time, and
holds what they bring within the response cap of the one answer they
stand in for: a peer answering each with a token near that cap is a
``PeerResponseTooLarge`` (the initiator then asks for fewer), not a
thousand times the cap in memory. Ops it has are served, others named
missing."""

from __future__ import annotations

import tracemalloc

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from peer import PeerLimits, PeerResponseTooLarge
from peer.sync_http import HttpSyncClient
from relay.testing.server import serve_on_loopback

CAP = 4 * 1024 * 1024


def v071_peer(token_of: dict[str, str]) -> Starlette:
    async def operation(request: Request) -> Response:
        cid = request.path_params["cid"]
        if cid not in token_of:
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse({"cid": cid, "jwsToken": token_of[cid]})

    return Starlette(routes=[Route("/operations/{cid}", operation)])


async def test_ops_fetched_one_by_one_are_held_within_one_answers_cap() -> None:
    big = "a" * (CAP // 2)
    cids = [f"bafy{i}" for i in range(200)]
    async with serve_on_loopback(v071_peer(dict.fromkeys(cids, big))) as url:
        client = HttpSyncClient(limits=PeerLimits(max_response_bytes=CAP))
        tracemalloc.start()
        try:
            with pytest.raises(PeerResponseTooLarge):
                await client.fetch_operations(url, cids)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await client.aclose()
    assert peak < 48 * 1024 * 1024, f"{peak} bytes held for a {CAP}-byte cap"


async def test_ops_fetched_one_by_one_are_served_or_named_missing() -> None:
    async with serve_on_loopback(v071_peer({"bafy1": "t1", "bafy3": "t3"})) as url:
        client = HttpSyncClient()
        try:
            fetched = await client.fetch_operations(url, ["bafy1", "bafy2", "bafy3"])
        finally:
            await client.aclose()
    assert fetched.tokens == ["t1", "t3"] and fetched.missing == ["bafy2"]
