"""A ``live`` peer whose feed reaches EOSE, ends the stream, and then, on
the connection the feed client opens again by itself, sends nothing but
heartbeat comments (no status, no EOSE) is a stalled link: every new
connection awaits its EOSE under ``live_stall_s``, not only the first one
or one that starts with a status event. Otherwise the link would stay
``live`` forever while nothing flows."""

from __future__ import annotations

import asyncio

from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.live import STALLED
from relay.peering.service import build_peering
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore
from tests.feed.test_live_peering import live_only

from .hostile_http import head, routed_peer
from .test_link_states_follow_replication import in_link, until

STALL_S = 0.5
CONFIG = PeeringConfig(
    backoff_base_s=0.05, backoff_max_s=0.2, sync_interval_s=0.2, live_stall_s=STALL_S
)
SSE = {"content-type": "text/event-stream", "connection": "close"}


class EndsThenBeats:
    """``/changes``: the first connection sends its status and EOSE, then
    ends; every later one sends heartbeats only, for as long as it is held."""

    def __init__(self) -> None:
        self.connections = 0
        self.beating = asyncio.Event()  # a heartbeats-only connection is open

    async def __call__(self, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.write(head(SSE))
        if self.connections == 1:
            writer.write(b'event: status\ndata: {"headSeq": 0}\n\n')
            writer.write(b'event: eose\nid: e.0\ndata: {"seq": 0}\n\n')
            await writer.drain()
            return  # the stream ends: the feed client reconnects
        self.beating.set()
        while True:
            writer.write(b": heartbeat\n\n")
            await writer.drain()
            await asyncio.sleep(0.05)


async def test_a_feed_reconnected_to_heartbeats_is_a_stalled_link() -> None:
    feed = EndsThenBeats()
    async with routed_peer({"/changes": feed}) as url:
        follower = create_relay(
            MemoryStore(), peering=build_peering([live_only(url)], None, CONFIG)
        )
        async with serve_on_loopback(follower.app):
            await until(lambda: in_link(follower, url).state == "live", 10)
            await asyncio.wait_for(feed.beating.wait(), 10)
            loop = asyncio.get_running_loop()
            beating_since = loop.time()
            await until(lambda: in_link(follower, url).state == "degraded_poll", 10 * STALL_S)
            # within the bound (and its slack), not at some later fault
            assert loop.time() - beating_since < 4 * STALL_S
            assert "EOSE" in in_link(follower, url).diagnostics[STALLED]
