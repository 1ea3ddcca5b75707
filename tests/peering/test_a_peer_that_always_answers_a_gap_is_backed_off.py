"""A gap (410) makes the live follower repair: a reconcile run or a replay
of the peer's whole log. A peer that answers every position with a gap,
even right after a repair, is backed off like a failing one (the pause
doubles up to ``backoff_max_s``) instead of having us repair in a loop."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from peer import PeerConfig
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore

WATCH_S = 3.0


def always_a_gap(calls: dict[str, int]) -> Starlette:
    async def changes(request: Request) -> JSONResponse:
        calls["changes"] += 1
        return JSONResponse({"error": "gone", "minSeq": 1, "epoch": "e"}, status_code=410)

    async def well_known(request: Request) -> JSONResponse:
        return JSONResponse({"did": "did:dfos:x", "changesFeed": {"epoch": "e", "headSeq": 0}})

    async def log(request: Request) -> JSONResponse:
        calls["log replays"] += 1
        return JSONResponse({"entries": [], "cursor": None})

    return Starlette(
        routes=[
            Route("/changes", changes),
            Route("/.well-known/dfos-relay", well_known),
            Route("/log", log),
        ]
    )


async def test_a_peer_that_always_answers_a_gap_is_backed_off() -> None:
    calls = {"changes": 0, "log replays": 0}
    config = PeeringConfig(backoff_base_s=0.25, backoff_max_s=1.0)
    async with serve_on_loopback(always_a_gap(calls)) as url:
        peer = PeerConfig(url, gossip=False, read_through=False, sync=False, live=True)
        follower = create_relay(MemoryStore(), peering=build_peering([peer], None, config))
        async with serve_on_loopback(follower.app):
            await asyncio.sleep(WATCH_S)
    # paused 0.25, 0.5, 1, 1 ... s after each repair: at most 5 in 3 s
    assert 2 <= calls["changes"] <= 6, calls
    assert calls["log replays"] <= 6, calls
