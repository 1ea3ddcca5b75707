"""Sync-in: pages each sync peer's GET /log from the cursor it issued,
ingests through the pipeline, persists the cursor after each page, and
stops each cycle at a per-peer op budget and time budget."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from pathlib import Path

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from peer import PeerConfig
from relay import create_relay
from relay.peering.service import Peering, build_peering
from relay.peering.sync import MAX_CYCLES_PER_CALL
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.peering.mesh import (
    FAST,
    assert_converged,
    global_log,
    in_process_mesh,
    post_all,
    shuffled,
)
from tests.support.relay_api import PAST_MS


async def test_workload_in_random_order_reaches_every_relay_by_sync_alone(
    tmp_path: Path,
) -> None:
    tokens = mixed_workload(300, seed=11, now_ms=PAST_MS)
    async with in_process_mesh(tmp_path, gossip=False, read_through=False, sync=True) as mesh:
        await post_all(mesh.http, mesh.urls[0], shuffled(tokens, seed=3))
        for _ in range(2):  # second round spreads each relay's own identity
            for relay in mesh.relays:
                await relay.sync_from_peers()
        cids = await assert_converged(mesh)
        assert len(cids) >= len(tokens)
        # a further cycle finds nothing new
        assert [await r.sync_from_peers() for r in mesh.relays] == [0, 0, 0]


async def test_peer_log_arriving_out_of_dependency_order_sequences(tmp_path: Path) -> None:
    """B's log holds ops in random order (content before its identity, forks
    before their parent); pages ingest through the pending buffer."""
    tokens = mixed_workload(200, seed=12, now_ms=PAST_MS)
    peers = {0: [PeerConfig("http://relay-b.test", gossip=False, read_through=False)], 1: []}
    async with in_process_mesh(
        tmp_path, 2, peers=peers, config=replace(FAST, sync_page_limit=7)
    ) as mesh:
        # B sequences them; its log order is B's ingestion order
        await post_all(mesh.http, mesh.urls[1], shuffled(tokens, seed=5))
        await mesh.relays[0].sync_from_peers()
        b_cids = {e["cid"] for e in await global_log(mesh.http, mesh.urls[1])}
        a_cids = {e["cid"] for e in await global_log(mesh.http, mesh.urls[0])}
        assert b_cids <= a_cids


async def test_cursor_is_the_peers_and_is_saved_per_page(tmp_path: Path) -> None:
    tokens = mixed_workload(100, seed=13, now_ms=PAST_MS)
    cfg = replace(FAST, sync_page_limit=25)
    peers = {0: [PeerConfig("http://relay-b.test", gossip=False, read_through=False)], 1: []}
    async with in_process_mesh(tmp_path, 2, peers=peers, config=cfg) as mesh:
        a, b = mesh.relays
        await b.ingest(tokens)
        peer_log = [e["cid"] for e in await global_log(mesh.http, mesh.urls[1])]
        saved: list[str] = []
        original = a.store.set_peer_cursor

        async def spy(peer_url: str, cursor: str) -> None:
            assert peer_url == mesh.urls[1]
            saved.append(cursor)
            await original(peer_url, cursor)

        a.store.set_peer_cursor = spy  # type: ignore[method-assign]
        await a.sync_from_peers()
        # every saved cursor is a position in the peer's log, advancing
        positions = [peer_log.index(c) for c in saved]
        assert positions == sorted(positions) and positions[-1] == len(peer_log) - 1
        assert len(saved) == -(-len(peer_log) // 25)
        # a new cycle starts from the saved cursor: only new ops come over
        more = mixed_workload(20, seed=14, now_ms=PAST_MS)
        await b.ingest(more)
        assert await a.sync_from_peers() == len(more)


async def test_each_cycle_has_a_per_peer_budget(tmp_path: Path) -> None:
    tokens = mixed_workload(120, seed=15, now_ms=PAST_MS)
    cfg = replace(FAST, sync_page_limit=20, sync_budget_ops=40)
    peers = {0: [PeerConfig("http://relay-b.test", gossip=False, read_through=False)], 1: []}
    async with in_process_mesh(tmp_path, 2, peers=peers, config=cfg) as mesh:
        a, b = mesh.relays
        await b.ingest(tokens)
        total = len(await global_log(mesh.http, mesh.urls[1]))
        cycles = 0
        while (
            await a.store.get_peer_cursor(mesh.urls[1]) is None
            or cycles == 0
            or (len(await global_log(mesh.http, mesh.urls[0])) < total + 2)
        ):
            before = len(await global_log(mesh.http, mesh.urls[0]))
            await a.sync_from_peers()
            after = len(await global_log(mesh.http, mesh.urls[0]))
            assert after - before <= 40
            cycles += 1
            assert cycles < 20
        assert cycles >= total // 40


async def test_a_peer_whose_log_never_ends_cannot_hold_a_catch_up() -> None:
    """Every page the same op and a new cursor: one call reads a few budgets
    and returns (the cursor keeps what was read; the next call goes on)."""
    token = mixed_workload(1, seed=16, now_ms=PAST_MS)[0]
    pages = itertools.count()

    async def log(request: object) -> JSONResponse:
        entry = {"cid": "bafyendless", "jwsToken": token}
        return JSONResponse({"entries": [entry], "cursor": f"c{next(pages)}"})

    cfg = replace(FAST, sync_budget_ops=50)
    async with serve_on_loopback(Starlette(routes=[Route("/log", log)])) as url:
        peering = build_peering([PeerConfig(url, gossip=False, read_through=False)], None, cfg)
        relay = create_relay(MemoryStore(), peering=peering)
        async with relay.running():
            await asyncio.wait_for(relay.sync_peer(url), 30)
            assert next(pages) <= 50 * MAX_CYCLES_PER_CALL + 1


async def test_a_peer_serving_pages_slowly_cannot_hold_a_cycle() -> None:
    """Every page late (inside the request deadline), one op each, a new
    cursor: a cycle stops asking after ``sync_cycle_s``, so the cycle that
    every other sync peer waits for ends (the cursor keeps what was read)."""
    token = mixed_workload(1, seed=17, now_ms=PAST_MS)[0]
    pages = itertools.count()

    async def log(request: object) -> JSONResponse:
        await asyncio.sleep(0.3)
        entry = {"cid": "bafyslow", "jwsToken": token}
        return JSONResponse({"entries": [entry], "cursor": f"c{next(pages)}"})

    cfg = replace(FAST, sync_cycle_s=1.0)
    async with serve_on_loopback(Starlette(routes=[Route("/log", log)])) as url:
        peering = build_peering([PeerConfig(url, gossip=False, read_through=False)], None, cfg)
        relay = create_relay(MemoryStore(), peering=peering)
        async with relay.running():
            started = asyncio.get_running_loop().time()
            await asyncio.wait_for(relay.sync_from_peers(), 10)
            assert asyncio.get_running_loop().time() - started < 2.0
            assert await relay.store.get_peer_cursor(url) is not None


async def test_interval_loop_syncs_in_the_background(tmp_path: Path) -> None:
    import asyncio

    tokens = mixed_workload(60, seed=16, now_ms=PAST_MS)
    cfg = replace(FAST, sync_interval_s=0.05)
    async with in_process_mesh(tmp_path, 2, config=cfg, gossip=False, read_through=False) as mesh:
        await mesh.relays[0].ingest(tokens)
        for _ in range(100):
            await asyncio.sleep(0.05)
            b = {e["cid"] for e in await global_log(mesh.http, mesh.urls[1])}
            if len(b) >= len(tokens):
                break
        await assert_converged(mesh)


async def test_a_cursor_the_peer_no_longer_knows_resets_once_to_the_start(
    tmp_path: Path,
) -> None:
    """The peer rebuilt its store, so our saved cursor means nothing there: it
    answers an empty page marked ``cursorUnknown``; when it cannot reconcile,
    we read from the start."""
    tokens = mixed_workload(60, seed=16, now_ms=PAST_MS)
    peers = {0: [PeerConfig("http://relay-b.test", gossip=False, read_through=False)], 1: []}
    async with in_process_mesh(tmp_path, 2, peers=peers) as mesh:
        a, b = mesh.relays
        assert isinstance(a.peering, Peering)
        a.peering.sync.repair = None  # as with a peer that cannot reconcile
        await b.ingest(tokens)
        # a cursor B never issued (as after a rebuild of B's log)
        foreign = "bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
        await a.store.set_peer_cursor(mesh.urls[1], foreign)
        assert await a.sync_from_peers() >= len(tokens)
        b_cids = {e["cid"] for e in await global_log(mesh.http, mesh.urls[1])}
        a_cids = {e["cid"] for e in await global_log(mesh.http, mesh.urls[0])}
        assert b_cids <= a_cids
        # the cursor now saved is one B issued
        assert await a.store.get_peer_cursor(mesh.urls[1]) in b_cids


async def test_a_cursor_the_peer_no_longer_knows_is_repaired_by_reconciliation(
    tmp_path: Path,
) -> None:
    """Instead of reading the peer's whole log again, we reconcile with it and
    page on from its current head: what it holds is here, the saved cursor is
    its head, and ops it accepts afterwards come by paging."""
    tokens = mixed_workload(80, seed=17, now_ms=PAST_MS)
    peers = {0: [PeerConfig("http://relay-b.test", gossip=False, read_through=False)], 1: []}
    async with in_process_mesh(tmp_path, 2, peers=peers) as mesh:
        a, b = mesh.relays
        await b.ingest(tokens[:60])
        foreign = "bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
        await a.store.set_peer_cursor(mesh.urls[1], foreign)
        await a.sync_from_peers()
        b_log = await global_log(mesh.http, mesh.urls[1])
        assert {e["cid"] for e in b_log} <= {
            e["cid"] for e in await global_log(mesh.http, mesh.urls[0])
        }
        peering = a.peering
        assert isinstance(peering, Peering)
        report = peering.repair.last[mesh.urls[1]]
        assert report.ok and report.direction == "pull" and report.sequenced > 0
        assert await a.store.get_peer_cursor(mesh.urls[1]) == b_log[-1]["cid"]
        await b.ingest(tokens[60:])
        assert await a.sync_from_peers() == 20  # paged on from B's head, not from the start
        b_cids = {e["cid"] for e in await global_log(mesh.http, mesh.urls[1])}
        assert b_cids <= {e["cid"] for e in await global_log(mesh.http, mesh.urls[0])}
