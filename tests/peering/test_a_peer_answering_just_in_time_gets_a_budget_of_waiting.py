"""The fan-out forwarder waits briefly for an origin's peer list
(``PeerDirectory.reread``). An origin whose well-known document answers
just within that wait, read after read, would hold the forwarder most of
the time: each peer gets a budget of waiting (``REREAD_WAIT_BUDGET_S`` per
``REREAD_WAIT_WINDOW_S``), past which its reads go on in the background."""

from __future__ import annotations

import asyncio
import time

from peer.http import PeerLimits
from peer.sync_http import HttpSyncClient
from relay.peering.directory import REREAD_WAIT_BUDGET_S, PeerDirectory

from .hostile_http import json_answer, raw_peer

JUST_IN_TIME_S = 0.3  # under the forwarder's wait
WAIT_S = 0.5
CALLS = 20  # 6 s of waiting without the budget
LIMITS = PeerLimits(read_timeout_s=5.0, pool_timeout_s=1.0, request_deadline_s=5.0)
SLOWPOKE = {"did": "did:dfos:slowpoke", "peers": []}


async def test_a_peer_answering_just_in_time_costs_at_most_its_budget() -> None:
    async with raw_peer(json_answer(SLOWPOKE, JUST_IN_TIME_S)) as url:
        client = HttpSyncClient(limits=LIMITS)
        directory = PeerDirectory([url], client)
        waited = 0.0
        fresh = 0
        try:
            for _ in range(CALLS):
                await asyncio.sleep(0.02)  # past the reread interval below
                started = time.monotonic()
                # an op that arrived now: only a read after it is believed
                fresh += await directory.reread(url, started, every_s=0.01, wait_s=WAIT_S)
                waited += time.monotonic() - started
        finally:
            await client.aclose()
    assert fresh >= 1, "reads within the budget are waited for and believed"
    # the budget and one wait begun within it: 1.5 s (6 s without a budget)
    assert REREAD_WAIT_BUDGET_S + WAIT_S <= 1.5
    assert waited < 1.5, waited
