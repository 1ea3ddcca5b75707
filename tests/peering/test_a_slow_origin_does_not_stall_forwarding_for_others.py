"""One forwarder serves every origin a coordinator forwards for: an origin
whose well-known document answers slowly, and that keeps pushing hop-"1"
ops its (cached) peer list does not make us a coordinator of, must not hold
it. The coordinator reads that list again at most once per interval and
waits for it briefly; meanwhile the hostile origin's ops go to every gossip
peer (its share is unknown), and the ops of a healthy origin are forwarded
to their shares at once, so every relay of the mesh has them promptly."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from peer.base import HOP_TO_COORDINATOR
from relay.peering.gossip import Outgoing
from relay.peering.rendezvous import coordinators, rank
from relay.protocol import decode_jws
from relay.testing.workload import mixed_workload
from tests.peering.mesh import FAST, Mesh, global_log, in_process_mesh, post_all
from tests.support.relay_api import PAST_MS

N = 9  # P = 8 gossip peers each: k = 3 coordinators per op, shares of 1 or 2
COORDINATOR, HEALTHY, HOSTILE = 0, 1, 2
# the hostile pushes make a read of its list at most once per 1 s
RENDEZVOUS = replace(FAST, fanout_direct_max=4, fanout_reread_s=1.0)
GOSSIP_ONLY = {"gossip": True, "read_through": False, "sync": False}
WELL_KNOWN_DELAY_S = 55.0  # inside the peer client's 60 s request deadline
PROMPTLY_S = 8.0  # far below the delay, with room for a busy two-core host


class SlowWellKnown:
    """A relay's app whose /.well-known/dfos-relay answers after
    ``WELL_KNOWN_DELAY_S`` once ``slow`` is set; counts those requests."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.slow = False
        self.asked = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.slow and scope.get("path") == "/.well-known/dfos-relay":
            self.asked += 1
            await asyncio.sleep(WELL_KNOWN_DELAY_S)
        await self.app(scope, receive, send)


async def ops_not_coordinated_by(mesh: Mesh, me: int, origin: int) -> list[Outgoing]:
    """Ops ``me`` holds of which the origin's peer list does not make it a
    coordinator: pushed with hop "1" by the origin, each makes ``me`` read
    that list again."""
    peers = [r.did for i, r in enumerate(mesh.relays) if i != origin]
    me_did = mesh.relays[me].did
    return [
        Outgoing(e["cid"], e["jwsToken"], HOP_TO_COORDINATOR)
        for e in await global_log(mesh.http, mesh.urls[me])
        if me_did not in coordinators(rank(peers, e["chainId"], e["cid"]))
    ]


async def keep_pushing(mesh: Mesh, origin: int, to: int, items: list[Outgoing]) -> None:
    """The hostile origin's gossip lane pushes them one POST at a time, for ever."""
    lane = mesh.peering(origin).gossip.lanes[mesh.urls[to]]
    while True:
        for item in items:
            lane.offer([item])
            await asyncio.sleep(0.02)


async def missing_at(mesh: Mesh, cids: set[str]) -> dict[str, int]:
    have = [{e["cid"] for e in await global_log(mesh.http, url)} for url in mesh.urls]
    return {url: len(cids - h) for url, h in zip(mesh.urls, have, strict=True) if cids - h}


async def test_a_slow_origin_does_not_stall_forwarding_for_others(tmp_path: Path) -> None:
    tokens = mixed_workload(60, seed=51, now_ms=PAST_MS)
    cids = {decode_jws(t).header["cid"] for t in tokens}
    async with in_process_mesh(tmp_path, N, config=RENDEZVOUS, **GOSSIP_ONLY) as mesh:
        await mesh.resolve_peers()
        await mesh.settle_gossip()  # every relay's own ops, everywhere
        hostile = SlowWellKnown(mesh.relays[HOSTILE].app)
        mesh.transport.mount(mesh.urls[HOSTILE], hostile)
        hostile.slow = True
        items = await ops_not_coordinated_by(mesh, COORDINATOR, HOSTILE)
        assert items, "some op the hostile origin can push to the coordinator"
        pusher = asyncio.create_task(keep_pushing(mesh, HOSTILE, COORDINATOR, items))
        try:
            while not hostile.asked:  # the coordinator is reading the slow list
                await asyncio.sleep(0.01)
            started = time.monotonic()
            await post_all(mesh.http, mesh.urls[HEALTHY], tokens)
            while missing := await missing_at(mesh, cids):
                assert time.monotonic() - started < PROMPTLY_S, f"forwards stalled: {missing}"
                await asyncio.sleep(0.1)
            fanout = mesh.peering(COORDINATOR).fanout
            assert fanout.forwarded > 0
            assert fanout.flooded > 0, "the hostile origin's ops went to every peer"
            # the read still running: no other, however many pushes
            assert hostile.asked == 1, hostile.asked
        finally:
            pusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pusher
