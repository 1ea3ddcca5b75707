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
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from peer import PeerConfig
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.live import FEED_CURSOR_SUFFIX
from relay.peering.service import Peering, build_peering
from relay.testing.server import free_port, serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client
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


def _hostile_feed(fault: str) -> Starlette:
    """A peer whose feed and well-known document are malformed as ``fault`` says."""

    async def changes(request: object) -> Response:
        if fault == "op-without-token":
            events = [
                'event: status\ndata: {"headSeq": 1}\n\n',
                'event: op\nid: e.1\ndata: {"seq": 1}\n\n',
                'event: eose\nid: e.1\ndata: {"seq": 1}\n\n',
            ]
            return Response("".join(events), media_type="text/event-stream")
        min_seq = None if fault == "gap-without-min-seq" else 5
        return JSONResponse({"error": "gone", "minSeq": min_seq, "epoch": "e"}, status_code=410)

    async def well_known(request: object) -> JSONResponse:
        feed = "yes" if fault == "gap-then-no-feed-document" else None
        return JSONResponse({"did": "did:dfos:x", "changesFeed": feed})

    async def log(request: object) -> JSONResponse:
        return JSONResponse({"entries": [], "cursor": None})

    return Starlette(
        routes=[
            Route("/changes", changes),
            Route("/.well-known/dfos-relay", well_known),
            Route("/log", log),
        ]
    )


@pytest.mark.parametrize(
    "fault", ["op-without-token", "gap-without-min-seq", "gap-then-no-feed-document"]
)
async def test_a_malformed_feed_is_a_failure_of_that_peer_retried_not_the_end(fault: str) -> None:
    async with serve_on_loopback(_hostile_feed(fault)) as url:
        follower = create_relay(MemoryStore(), peering=build_peering([live_only(url)], None, FAST))
        async with serve_on_loopback(follower.app):
            peering = follower.peering
            assert isinstance(peering, Peering)
            for _ in range(100):
                if peering.ledger.get(url, "in").failures >= 3:
                    break
                await asyncio.sleep(0.05)
            link = peering.ledger.get(url, "in")
            assert link.failures >= 3 and link.last_error  # still trying, and saying why
            assert not any(task.done() for task in peering.live._tasks)
    # the relay stopped cleanly (its lifespan ended without an error)


def _flaky(relay: Relay, outage_s: float, reconciles: bool = True) -> Starlette:
    """``relay`` whose feed answers one 410 (and one to every token of epoch
    "x"), and whose log and sync routes fail for ``outage_s`` after it: the
    gap cannot be repaired at once; without ``reconciles``, only by its log."""
    state: dict[str, float] = {}

    async def changes(request: Request) -> Response:
        old_epoch = request.query_params.get("since", "").startswith("x.")
        if "gone_at" not in state or old_epoch:  # a token of epoch "x" is always gone
            state.setdefault("gone_at", asyncio.get_running_loop().time())
            return JSONResponse({"error": "gone", "minSeq": 1, "epoch": "x"}, status_code=410)
        return await _forward(relay, request)

    async def failing(request: Request) -> Response:
        if not reconciles and request.url.path.startswith("/sync/"):
            return JSONResponse({"error": "not found"}, status_code=404)
        down = asyncio.get_running_loop().time() - state.get("gone_at", 0) < outage_s
        if "gone_at" in state and down:
            return JSONResponse({"error": "unavailable"}, status_code=503)
        return await _forward(relay, request)

    app = Starlette(
        routes=[
            Route("/changes", changes),
            Route("/log", failing),
            Route("/sync/{rest:path}", failing, methods=["GET", "POST"]),
            Mount("/", app=relay.app),
        ]
    )
    app.router.lifespan_context = relay.app.router.lifespan_context
    return app


async def _forward(relay: Relay, request: Request) -> Response:
    async with asgi_client(relay.app, base_url="http://source") as http:
        if request.url.path == "/changes":  # a stream that ends: the follower comes back
            params = {**request.query_params, "live": "false"}
            answer = await http.get("/changes", params=params)
        else:
            body = await request.body()
            answer = await http.request(
                request.method, f"{request.url.path}?{request.url.query}", content=body
            )
    return Response(answer.content, answer.status_code, media_type=answer.headers["content-type"])


async def test_a_gap_repair_that_fails_is_retried_before_following_on() -> None:
    source = create_relay(MemoryStore())
    await_later = mixed_workload(20, seed=113, now_ms=PAST_MS)
    async with serve_on_loopback(_flaky(source, outage_s=1.0)) as url:
        await source.ingest(mixed_workload(30, seed=114, now_ms=PAST_MS))
        follower = create_relay(MemoryStore(), peering=build_peering([live_only(url)], None, FAST))
        async with serve_on_loopback(follower.app):
            await source.ingest(await_later)
            await until_contains(follower, source)  # the first 30 too, not only what came after
            peering = follower.peering
            assert isinstance(peering, Peering)
            assert peering.ledger.get(url, "in").state != "repairing"


async def test_a_gap_replay_that_failed_at_once_starts_over_the_next_time() -> None:
    """The log cursor from before the gap may mean nothing on the peer now:
    until the replay saved one of its own, every attempt reads from the start."""
    source = create_relay(MemoryStore())
    async with serve_on_loopback(_flaky(source, outage_s=1.0, reconciles=False)) as url:
        await source.ingest(mixed_workload(30, seed=115, now_ms=PAST_MS))
        entries = (await source.store.read_log(None, 1000)).entries
        store = MemoryStore()
        await store.set_peer_cursor(url, entries[len(entries) // 2].cid)  # from before the gap
        await store.set_peer_cursor(url + FEED_CURSOR_SUFFIX, "x.5")  # an epoch now gone
        follower = create_relay(store, peering=build_peering([live_only(url)], None, FAST))
        async with serve_on_loopback(follower.app):
            await until_contains(follower, source)  # the first half too
