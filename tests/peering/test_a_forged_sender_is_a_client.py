"""A push that names a peer in ``dfos-relay-sender`` without that peer's
sender proof is a client's (README "A large mesh"): two real relays on
loopback, and a plain httpx client forging the header.

Before sender proofs, the forged header made the receiver take the ops as
the named peer's: never pushed to it (it missed them until reconciliation)
and, with hop "2", forwarded nowhere.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from peer.base import FANOUT_HOP_HEADER, HOP_FORWARDED, HOP_TO_COORDINATOR, RELAY_SENDER_HEADER
from relay.testing.workload import mixed_workload
from tests.peering.loopback_pair import loopback_pair, unproven
from tests.support.relay_api import PAST_MS


@pytest.mark.parametrize(
    "hop", [None, HOP_FORWARDED, HOP_TO_COORDINATOR], ids=["no-hop", "hop-2", "hop-1"]
)
async def test_a_forged_sender_header_does_not_keep_ops_from_the_named_peer(
    tmp_path: Path, hop: str | None
) -> None:
    tokens = mixed_workload(12, seed=41, now_ms=PAST_MS)
    async with loopback_pair(tmp_path) as pair:
        a, b = pair.relays
        forged = {RELAY_SENDER_HEADER: b.did}
        if hop is not None:
            forged[FANOUT_HOP_HEADER] = hop
        async with httpx.AsyncClient(timeout=10) as plain:
            answer = await plain.post(
                pair.urls[0] + "/operations", json={"operations": tokens}, headers=forged
            )
        assert answer.status_code == 200  # never refused: the ops are self-certifying
        results = answer.json()["results"]
        assert {r["status"] for r in results} == {"new"}
        cids = [r["cid"] for r in results]
        await pair.settle()
        # B receives them by gossip, as it would after any client's push to A
        assert await pair.missing_at(1, cids) == []
        # A did not note them as B's, and counted the unproven push
        assert not any(pair.peering(0).sent_us(pair.urls[1], cid) for cid in cids)
        assert unproven(a, "missing") == 1
