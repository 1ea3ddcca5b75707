"""A ``live`` peer whose changes feed answers 200 and then sends nothing but
heartbeat comments (never a status, an op or an EOSE) is not a healthy,
``initial`` link forever: once it has sent no event for ``live_stall_s``
before its EOSE the stream is faulty. The in-link shows it
(``degraded_poll``, the reason in its diagnostics), the peer's ``/log`` is polled
meanwhile so its ops still arrive, and the feed is tried again with
backoff: once it reaches EOSE the link is ``live`` again. A catch-up that
takes longer than the bound but sends events all along is no stall."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.live import STALLED
from relay.peering.service import build_peering
from relay.testing.server import free_port, serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.feed.test_live_peering import cids, live_only, until_contains
from tests.support.relay_api import PAST_MS

from .test_link_states_follow_replication import in_link, until

STALL_S = 1.0
CONFIG = PeeringConfig(
    backoff_base_s=0.05, backoff_max_s=0.2, sync_interval_s=0.2, live_stall_s=STALL_S
)


@dataclass
class HeartbeatsOnly:
    """A real relay whose ``/changes`` only sends heartbeats while ``on``."""

    relay: Relay
    on: bool = True
    feeds: int = 0  # /changes requests answered with heartbeats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/changes" and self.on:
            self.feeds += 1
            beats = StreamingResponse(_beats(), media_type="text/event-stream")
            await beats(scope, receive, send)
            return
        await self.relay.app(scope, receive, send)  # lifespan included


async def _beats() -> AsyncIterator[bytes]:
    while True:
        yield b": heartbeat\n\n"
        await asyncio.sleep(0.05)


async def test_a_heartbeats_only_feed_is_a_stalled_link() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    source = create_relay(MemoryStore())
    await source.ingest(mixed_workload(30, seed=103, now_ms=PAST_MS))
    peer = HeartbeatsOnly(source)
    follower = create_relay(MemoryStore(), peering=build_peering([live_only(url)], None, CONFIG))
    async with serve_on_loopback(peer, port), serve_on_loopback(follower.app):
        await until(lambda: in_link(follower, url).state == "degraded_poll", 10)
        assert "EOSE" in in_link(follower, url).diagnostics[STALLED]
        await until_contains(follower, source)  # polled meanwhile
        await until(lambda: peer.feeds >= 2, 10)  # and the feed tried again
        peer.on = False  # the feed works again: it reaches EOSE
        await source.ingest(mixed_workload(5, seed=104, now_ms=PAST_MS))
        await until(lambda: in_link(follower, url).state == "live", 10)
        await until_contains(follower, source)
        assert await cids(source) <= await cids(follower)
        link = in_link(follower, url)
        assert (link.failures, link.last_error) == (0, None)
        assert STALLED not in link.diagnostics


def trickled_feed(tokens: list[str], every_s: float) -> Starlette:
    """A feed that sends its status, then one op each ``every_s``, then its
    EOSE, then heartbeats: slow, never silent for ``every_s``."""

    async def events() -> AsyncIterator[bytes]:
        yield b'event: status\ndata: {"headSeq": %d}\n\n' % len(tokens)
        for seq, token in enumerate(tokens, 1):
            await asyncio.sleep(every_s)
            data = json.dumps({"jwsToken": token, "seq": seq}).encode()
            yield b"event: op\nid: e.%d\ndata: %s\n\n" % (seq, data)
        yield b'event: eose\nid: e.%d\ndata: {"seq": %d}\n\n' % (len(tokens), len(tokens))
        async for beat in _beats():
            yield beat

    async def changes(request: Request) -> Response:
        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/changes", changes)])


async def test_a_slow_catch_up_with_events_is_not_a_stall() -> None:
    tokens = mixed_workload(12, seed=105, now_ms=PAST_MS)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    follower = create_relay(MemoryStore(), peering=build_peering([live_only(url)], None, CONFIG))
    every_s = STALL_S / 4  # 20 ops: the catch-up takes 5 bounds
    async with (
        serve_on_loopback(trickled_feed(tokens, every_s), port),
        serve_on_loopback(follower.app),
    ):
        await until(lambda: in_link(follower, url).state == "live", 20)
        link = in_link(follower, url)
        assert (link.failures, link.last_error) == (0, None)
        assert STALLED not in link.diagnostics
        reference = create_relay(MemoryStore())
        await reference.ingest(tokens)
        assert await cids(reference) <= await cids(follower)
        await asyncio.sleep(2 * STALL_S)  # heartbeats after the EOSE: no stall either
        assert in_link(follower, url).state == "live"
