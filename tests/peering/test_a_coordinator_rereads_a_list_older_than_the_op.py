"""A coordinator's cached copy of an origin's peer list may predate the op:
the origin named it a coordinator by the list it advertises now. A list
read before the op arrived that does not make us a coordinator is read
again before it is believed, so a healthy mesh loses no forward to a stale
cache (the mesh bench lost half of its healthy phase's pairs when a list
read within the last 30 s was believed)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

from relay.protocol import decode_jws
from relay.testing.workload import mixed_workload
from tests.peering.mesh import FAST, in_process_mesh, post_all
from tests.peering.test_a_slow_origin_does_not_stall_forwarding_for_others import missing_at
from tests.support.relay_api import PAST_MS

N = 9  # P = 8 gossip peers each: k = 3 coordinators per op
RENDEZVOUS = replace(FAST, fanout_direct_max=4)
GOSSIP_ONLY = {"gossip": True, "read_through": False, "sync": False}
PROMPTLY_S = 8.0


async def test_a_list_read_before_the_origin_knew_its_peers_is_read_again(
    tmp_path: Path,
) -> None:
    tokens = mixed_workload(60, seed=52, now_ms=PAST_MS)
    cids = {decode_jws(t).header["cid"] for t in tokens}
    async with in_process_mesh(tmp_path, N, config=RENDEZVOUS, **GOSSIP_ONLY) as mesh:
        # the last relay reads its peers last: every other relay's copy of its
        # list was read while it knew none of its peers' DIDs
        await mesh.resolve_peers()
        origin = N - 1
        lists = [mesh.peering(i).directory.peers_of(mesh.urls[origin]) or () for i in range(N - 1)]
        stale = [i for i, listed in enumerate(lists) if any(a.did is None for a in listed)]
        assert stale, "the other relays hold a list of the origin's that predates its DIDs"
        started = time.monotonic()
        await post_all(mesh.http, mesh.urls[origin], tokens)
        while missing := await missing_at(mesh, cids):
            assert time.monotonic() - started < PROMPTLY_S, f"forwards lost: {missing}"
            await asyncio.sleep(0.1)
        assert sum(mesh.peering(i).fanout.forwarded for i in range(N)) > 0
