"""Two relays on one store stand for two workers of ``serve --workers N``
(SQLite file, Postgres schema), each gossiping the ops it ingested to one
peer: the first reaches it, the second does not. The out-link the first
shows (``GET /peers``, the gauges) is held below the op the second could
not push, though the first delivered everything of its own; when the
second stops, what it held back is carried by the first (``repairing``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from peer import AsgiMeshTransport, PeerConfig
from peer.sync_http import HttpSyncClient
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.testing.workload import WorkloadBuilder
from stores.base import LinkRecord, RelayStore
from stores.memory import MemoryStore
from tests.stores.conftest import reopen
from tests.support.backends import make_store
from tests.support.relay_api import PAST_MS

PEER = "http://peer.test"
QUICK = PeeringConfig(backoff_base_s=0.01, backoff_max_s=0.05, gossip_flush_timeout_s=0.2)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def shared(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[RelayStore]:
    async with make_store(request.param, tmp_path) as store:  # type: ignore[arg-type]
        yield store


def out_link(relay: Relay) -> LinkRecord:
    (view,) = [v for v in relay.peer_links() if v.record.direction == "out"]
    return view.record


async def until(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    return check()


def seq(record: LinkRecord) -> int:
    return int(record.applied_token or 0)


async def test_a_worker_shows_the_link_held_at_an_op_another_worker_could_not_push(
    shared: RelayStore,
) -> None:
    peer = create_relay(MemoryStore())
    to_peer = [PeerConfig(PEER, gossip=True, read_through=False, sync=False)]
    async with (
        peer.running(),
        httpx.AsyncClient(transport=AsgiMeshTransport({PEER: peer.app})) as reaching,
        httpx.AsyncClient(transport=AsgiMeshTransport()) as cut_off,
    ):
        first = create_relay(
            shared, peering=build_peering(to_peer, HttpSyncClient(reaching), QUICK)
        )
        second = create_relay(
            reopen(shared), peering=build_peering(to_peer, HttpSyncClient(cut_off), QUICK)
        )
        first_peering = first.peering
        assert isinstance(first_peering, Peering)
        async with first.running():
            async with second.running():
                unpushed = WorkloadBuilder(seed=71, start_ms=PAST_MS)
                unpushed.identity()
                await second.ingest(unpushed.tokens)
                held = await shared.log_length()  # the seq of the op the second cannot push
                pushed = WorkloadBuilder(seed=72, start_ms=PAST_MS)
                pushed.identity()
                pushed.identity()
                await first.ingest(pushed.tokens)
                await first_peering.flushed()
                head = await shared.log_length()
                assert first_peering.out_links.watermark(PEER) == head  # its own share
                assert await until(lambda: seq(out_link(first)) == held - 1), out_link(first)
                (view,) = [v for v in first.peer_links() if v.record.direction == "out"]
                assert view.lag_ops == head - held + 1
            # the second stopped holding its op back: the first carries it
            assert await until(lambda: out_link(first).state == "repairing"), out_link(first)
            assert seq(out_link(first)) == held - 1
            assert first_peering.out_links.watermark(PEER) == held - 1
