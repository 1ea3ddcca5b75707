"""The ``live`` peer behaviour: a relay syncs in by following each live
peer's changes feed (through the normal pipeline, token saved after
ingest). Three relays converge by live following alone; against a peer
without a feed (as a v0.7.1 relay) the relay falls back to polling its log;
after the peer's epoch changes (410) it resyncs the log and follows on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from peer import PeerConfig
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.live import FEED_CURSOR_SUFFIX
from relay.peering.service import build_peering
from relay.testing.server import free_port, serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS

FAST = PeeringConfig(backoff_base_s=0.05, backoff_max_s=0.2, sync_interval_s=0.2)


def live_only(url: str) -> PeerConfig:
    return PeerConfig(url, gossip=False, read_through=False, sync=False, live=True)


@asynccontextmanager
async def live_mesh(n: int) -> AsyncIterator[tuple[list[Relay], list[str]]]:
    ports = [free_port() for _ in range(n)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    relays = [
        create_relay(
            MemoryStore(),
            peering=build_peering([live_only(u) for u in urls if u != me], None, config=FAST),
        )
        for me in urls
    ]
    async with AsyncExitStack() as stack:
        for relay, port in zip(relays, ports, strict=True):
            await stack.enter_async_context(serve_on_loopback(relay.app, port))
        yield relays, urls


async def cids(relay: Relay) -> set[str]:
    return {e.cid for e in await relay.store.read_seq_range(0, 10**9, 10**6)}


async def until_converged(relays: list[Relay], timeout_s: float = 20) -> set[str]:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        sets = [await cids(r) for r in relays]
        if all(s == sets[0] for s in sets):
            return sets[0]
        assert asyncio.get_running_loop().time() < deadline, [len(s) for s in sets]
        await asyncio.sleep(0.1)


async def test_three_relays_converge_by_live_following_alone() -> None:
    async with live_mesh(3) as (relays, urls):
        workloads = [mixed_workload(40, seed=91 + i, now_ms=PAST_MS) for i in range(3)]
        for relay, tokens in zip(relays, workloads, strict=True):
            await relay.ingest(tokens)
        union = await until_converged(relays)
        assert len(union) >= sum(len(w) for w in workloads)
        # the token of each peer is saved: a later op arrives live
        more = mixed_workload(10, seed=99, now_ms=PAST_MS)
        await relays[0].ingest(more)
        await until_converged(relays)
        saved = await relays[1].store.get_peer_cursor(urls[0] + FEED_CURSOR_SUFFIX)
        assert saved is not None and saved.endswith(f".{await relays[0].store.log_length()}")


def without_feed(relay: Relay) -> Starlette:
    """A real relay whose changes feed is not there, as on a v0.7.1 relay."""

    async def not_found(request: object) -> JSONResponse:
        return JSONResponse({"error": "not found"}, status_code=404)

    app = Starlette(routes=[Route("/changes", not_found), Mount("/", app=relay.app)])
    app.router.lifespan_context = relay.app.router.lifespan_context
    return app


async def test_falls_back_to_log_polling_against_a_peer_without_a_feed() -> None:
    old_port = free_port()
    old_url = f"http://127.0.0.1:{old_port}"
    old = create_relay(MemoryStore())
    follower = create_relay(
        MemoryStore(), peering=build_peering([live_only(old_url)], None, config=FAST)
    )
    async with serve_on_loopback(without_feed(old), old_port):
        await old.ingest(mixed_workload(30, seed=101, now_ms=PAST_MS))
        async with serve_on_loopback(follower.app):
            want = await cids(old)
            for _ in range(200):
                if want <= await cids(follower):
                    break
                await asyncio.sleep(0.05)
            assert want <= await cids(follower)
            assert old_url in follower.peering.live.polling  # type: ignore[union-attr]


async def until_contains(follower: Relay, source: Relay, timeout_s: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await cids(source) <= await cids(follower):
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)


async def test_a_feed_gap_resyncs_the_log_then_follows_on() -> None:
    source_port = free_port()
    source_url = f"http://127.0.0.1:{source_port}"
    source = create_relay(MemoryStore())
    follower = create_relay(
        MemoryStore(), peering=build_peering([live_only(source_url)], None, config=FAST)
    )
    async with serve_on_loopback(source.app, source_port), serve_on_loopback(follower.app):
        await source.ingest(mixed_workload(20, seed=111, now_ms=PAST_MS))
        await until_contains(follower, source)
        await source.store.reset_feed_epoch()  # every token the follower holds is now 410
        # the follower reconnects (as after a restart of either side)
        await follower.peering.live.stop()  # type: ignore[union-attr]
        await source.ingest(mixed_workload(20, seed=112, now_ms=PAST_MS))
        follower.peering.live.start(follower)  # type: ignore[union-attr]
        await until_contains(follower, source)
        async with httpx.AsyncClient() as http:
            epoch = (await http.get(f"{source_url}/.well-known/dfos-relay")).json()["changesFeed"][
                "epoch"
            ]
        for _ in range(100):  # saved once the resync is done
            saved = await follower.store.get_peer_cursor(source_url + FEED_CURSOR_SUFFIX)
            if saved is not None and saved.startswith(epoch + "."):
                break
            await asyncio.sleep(0.05)
        assert saved is not None and saved.startswith(epoch + ".")
