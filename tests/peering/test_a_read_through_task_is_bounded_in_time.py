"""The task behind a read-through goes on after the GET got its 404 (to
fill the store), but asks one peer for pages for at most
``read_through_fetch_s``: a peer serving a chain log one op a page, each
page slowly and with a new cursor, is then cut off, backed off and
logged, instead of being paged for up to ``read_through_max_ops`` pages."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from peer import PeerConfig
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS


async def test_a_read_through_task_is_bounded_in_time(caplog: pytest.LogCaptureFixture) -> None:
    token = mixed_workload(1, seed=19, now_ms=PAST_MS)[0]
    pages = itertools.count()

    async def chain_log(request: Request) -> JSONResponse:
        await asyncio.sleep(0.1)
        n = next(pages)
        return JSONResponse({"entries": [{"cid": f"b{n}", "jwsToken": token}], "cursor": f"c{n}"})

    hostile = Starlette(routes=[Route("/identities/{did}/log", chain_log)])
    config = PeeringConfig(
        read_through_deadline_s=0.2, read_through_fetch_s=1.0, backoff_base_s=30.0
    )
    async with serve_on_loopback(hostile) as url:
        peer = PeerConfig(url, gossip=False, sync=False, read_through=True)
        relay = create_relay(MemoryStore(), peering=build_peering([peer], None, config))
        peering = relay.peering
        assert isinstance(peering, Peering)
        async with (
            relay.running(),
            asgi_client(relay.app) as http,
        ):
            assert (await http.get("/identities/did:dfos:nosuchchain")).status_code == 404
            await asyncio.sleep(2.0)
            asked = next(pages)
            await asyncio.sleep(0.5)
            assert next(pages) == asked + 1, "the task still pages the peer"
            assert not peering.backoff.ready(url)
    assert asked <= 15
    assert any(url in r.getMessage() and "PeerTimeout" in r.getMessage() for r in caplog.records)
