"""A peer that serves forgeries of the ops it advertised (the right
payloads, so the right CIDs, under signatures that do not verify) costs
one fetch, not one per thousand ids: fetching stops at the first batch of
which no op verifies, and the run fails, so the peer is backed off. Ops
that verify in a batch keep fetching going."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from peer.base import PeerConfig
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.protocol import decode_jws
from relay.protocol.negentropy import id_from_cid
from stores.base import RelayStore
from stores.memory import MemoryStore
from tests.reconcile.hostile_responder import Reply, hostile, id_list
from tests.support.waiting_ops import forged_signature, other_identities

COUNT = 2500  # three fetch batches of at most 1000


@pytest.fixture(scope="module")
def geneses() -> dict[str, str]:
    """Identity geneses by CID: each verifies by itself, so a forgery of one
    is rejected for its signature at once (nothing for it to wait for)."""
    _, tokens = other_identities(seed=61, count=COUNT)
    return {str(decode_jws(t).header_cid): t for t in tokens}


class Server:
    """Serves what it is asked for from ``tokens``, and counts the asking."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens, self.requests = tokens, 0

    def __call__(self, cids: list[str]) -> dict[str, Any]:
        self.requests += 1
        return {"operations": [self.tokens[c] for c in cids], "missing": []}


def _advertising(cids: list[str]) -> Reply:
    ids = sorted(id_from_cid(c) for c in cids)

    async def claim(_: bytes) -> bytes:
        return id_list(ids)

    return claim


@pytest.fixture
async def relay(store: RelayStore) -> AsyncIterator[Relay]:
    r = create_relay(store)
    async with r.running():
        yield r


async def test_fetching_stops_at_the_first_batch_of_forgeries(
    relay: Relay, geneses: dict[str, str]
) -> None:
    forged = Server({cid: forged_signature(t) for cid, t in geneses.items()})
    async with hostile(_advertising(list(geneses)), forged) as url:
        report = await relay.reconcile(url, "pull")
    assert forged.requests == 1 and report.fetched == 1000  # without the stop: 3 and 2500
    assert report.sequenced == 0
    assert report.error == "peer served 1000 ops of which none verify (1500 more not asked for)"


async def test_a_batch_with_ops_that_verify_keeps_fetching_going(
    relay: Relay, geneses: dict[str, str]
) -> None:
    cids = list(geneses)
    # one op in ten is genuine: every batch has some that verify
    mixed = {
        cid: token if i % 10 == 0 else forged_signature(token)
        for i, (cid, token) in enumerate(geneses.items())
    }
    server = Server(mixed)
    async with hostile(_advertising(cids), server) as url:
        report = await relay.reconcile(url, "pull")
    assert server.requests == 3 and report.fetched == COUNT
    assert report.sequenced == COUNT // 10 and report.ok


async def test_a_peer_serving_forgeries_is_backed_off(geneses: dict[str, str]) -> None:
    forged = Server({cid: forged_signature(t) for cid, t in geneses.items()})
    config = PeeringConfig(reconcile_interval_s=None, backoff_base_s=60.0, backoff_max_s=60.0)
    async with hostile(_advertising(list(geneses)), forged) as url:
        peer = PeerConfig(url, gossip=False, read_through=False, sync=False, reconcile=True)
        relay = create_relay(MemoryStore(), peering=build_peering([peer], None, config))
        async with relay.running():
            peering = relay.peering
            assert isinstance(peering, Peering)
            report = await peering.repair.run_once(url, direction="pull")
            assert report is not None and "none verify" in (report.error or "")
            assert peering.backoff.failures(url) >= 1 and peering.backoff.delay(url) > 1
    assert forged.requests <= 2  # the run at start, and ours; 3 each without the stop
