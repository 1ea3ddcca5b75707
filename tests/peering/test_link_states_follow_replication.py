"""The replication ledger's link states follow what replication does,
between real relays on loopback: a live in-link goes ``initial`` -> ``live``
at the first EOSE (failures before it are counted, and reset by a success);
a feed gap (410) goes ``repairing`` -> ``live``; a peer without a feed (as a
v0.7.1 relay) is ``degraded_poll``; an out-link's push watermark reaches our
head once gossip delivered; a paused link stops and survives a restart."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from peer import PeerConfig
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.testing.server import free_port, serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import FULL_SCOPE, LinkRecord
from stores.memory import MemoryStore
from stores.sqlite import SqliteStore
from tests.feed.test_live_peering import FAST, cids, live_only, until_contains, without_feed
from tests.peering.mesh import in_process_mesh
from tests.support.relay_api import PAST_MS


def peering(relay: Relay) -> Peering:
    assert isinstance(relay.peering, Peering)
    return relay.peering


async def until(check: Callable[[], Awaitable[bool] | bool], timeout_s: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        result = check()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def in_link(relay: Relay, url: str) -> LinkRecord:
    return peering(relay).ledger.get(url, "in")


def transitions(caplog: pytest.LogCaptureFixture, url: str) -> list[str]:
    """The in-link's state changes, from the ledger's log lines."""
    prefix = f"peer {url}: in-link {FULL_SCOPE}: "
    return [r.getMessage()[len(prefix):] for r in caplog.records
            if r.getMessage().startswith(prefix)]  # fmt: skip


async def test_a_live_link_goes_initial_then_live_and_counts_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "dfos_relay.peering")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    source = create_relay(MemoryStore())
    follower = create_relay(MemoryStore(), peering=build_peering([live_only(url)], None, FAST))
    async with serve_on_loopback(follower.app):
        # the source is not up yet: the link stays initial and counts failures
        await until(lambda: in_link(follower, url).failures >= 2)
        link = in_link(follower, url)
        assert link.state == "initial"
        assert link.last_error and link.last_failure_ms
        async with serve_on_loopback(source.app, port):
            await source.ingest(mixed_workload(20, seed=7, now_ms=PAST_MS))
            await until_contains(follower, source)
            await until(lambda: in_link(follower, url).state == "live")
            head = await source.store.log_length()
            await until(lambda: applied_seq(follower, url) == head)
            link = in_link(follower, url)
            assert (link.failures, link.last_error) == (0, None)
            assert link.remote_head == head and link.pending_tokens == ()
            view = next(v for v in peering(follower).link_views() if v.record.key == link.key)
            assert (view.lag_ops, view.lag_seconds) == (0, 0.0)
    assert transitions(caplog, url) == ["initial -> live"]


def applied_seq(relay: Relay, url: str) -> int:
    token = in_link(relay, url).applied_token or ""
    return int(token.rpartition(".")[2] or -1)


async def test_a_feed_gap_goes_repairing_then_live(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "dfos_relay.peering")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    source = create_relay(MemoryStore())
    follower = create_relay(MemoryStore(), peering=build_peering([live_only(url)], None, FAST))
    async with serve_on_loopback(source.app, port), serve_on_loopback(follower.app):
        await source.ingest(mixed_workload(20, seed=11, now_ms=PAST_MS))
        await until_contains(follower, source)
        await until(lambda: in_link(follower, url).state == "live")
        await source.store.reset_feed_epoch()  # every token the follower holds is now 410
        await peering(follower).live.stop()
        await source.ingest(mixed_workload(20, seed=12, now_ms=PAST_MS))
        peering(follower).live.start(follower)
        await until_contains(follower, source)
        await until(lambda: "repairing -> live" in transitions(caplog, url))
    seen = transitions(caplog, url)
    assert seen[0] == "initial -> live"
    # the follow restarts (initial), hits the gap (repairing), repairs (live)
    assert seen[-3:] == ["live -> initial", "initial -> repairing", "repairing -> live"]


async def test_a_peer_without_a_feed_is_degraded_poll() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    old = create_relay(MemoryStore())
    follower = create_relay(MemoryStore(), peering=build_peering([live_only(url)], None, FAST))
    async with serve_on_loopback(without_feed(old), port):
        await old.ingest(mixed_workload(20, seed=21, now_ms=PAST_MS))
        async with serve_on_loopback(follower.app):
            want = await cids(old)
            await until(lambda: _contains(follower, want))
            await until(lambda: in_link(follower, url).last_success_ms is not None)
            link = in_link(follower, url)
            assert link.state == "degraded_poll"
            # the polled link carries the peer's log cursor; a v0.7.1 peer has no head seq
            cursor = await follower.store.get_peer_cursor(url)
            assert cursor is not None and link.applied_token == cursor
            view = next(v for v in peering(follower).link_views() if v.record.key == link.key)
            assert view.lag_ops is None


async def _contains(relay: Relay, want: set[str]) -> bool:
    return want <= await cids(relay)


async def test_the_out_link_watermark_reaches_our_head(tmp_path: Path) -> None:
    gossip_only = {"gossip": True, "read_through": False, "sync": False}
    async with in_process_mesh(tmp_path, 2, **gossip_only) as mesh:
        a, b = mesh.relays
        await a.ingest(mixed_workload(30, seed=31, now_ms=PAST_MS))
        await mesh.settle_gossip()
        head = await a.store.log_length()
        link = peering(a).ledger.get(mesh.urls[1], "out")
        assert (link.state, link.applied_token, link.pending_tokens) == ("live", str(head), ())
        view = next(v for v in peering(a).link_views() if v.record.key == link.key)
        assert view.lag_ops == 0
        assert await cids(a) <= await cids(b)


async def test_a_paused_link_stops_and_stays_paused_across_a_restart(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    source = create_relay(MemoryStore())
    path = tmp_path / "follower.sqlite"

    def follower() -> Relay:
        return create_relay(SqliteStore(path), peering=build_peering([live_only(url)], None, FAST))

    first = follower()
    async with serve_on_loopback(source.app, port):
        async with serve_on_loopback(first.app):
            await source.ingest(mixed_workload(10, seed=41, now_ms=PAST_MS))
            await until_contains(first, source)
            await until(lambda: in_link(first, url).state == "live")
            await peering(first).pause(url)
            assert in_link(first, url).state == "paused"
            before = await cids(first)
            await source.ingest(mixed_workload(10, seed=42, now_ms=PAST_MS))
            await asyncio.sleep(0.5)
            assert await cids(first) == before  # nothing more is followed
        stored = await _stored_links(path)
        assert {(r.direction, r.state) for r in stored if r.peer_url == url} >= {("in", "paused")}

        again = follower()
        async with serve_on_loopback(again.app):
            assert in_link(again, url).state == "paused"  # loaded from the store
            await asyncio.sleep(0.3)
            assert await cids(again) == before
            await peering(again).resume(url)
            await until_contains(again, source)
            await until(lambda: in_link(again, url).state == "live")


async def _stored_links(path: Path) -> list[LinkRecord]:
    store = SqliteStore(path)
    await store.open()
    try:
        return await store.list_links()
    finally:
        await store.close()


async def test_lost_gossip_holds_the_watermark_until_a_reconciliation_pushed(
    tmp_path: Path,
) -> None:
    config = PeeringConfig(backoff_base_s=0.01, backoff_max_s=0.05, gossip_queue_max=5,
                           reconcile_interval_s=None)  # fmt: skip
    b_url = "http://relay-b.test"
    to_b = PeerConfig(b_url, gossip=True, read_through=False, sync=False, reconcile=True)
    async with in_process_mesh(tmp_path, 2, config=config, peers={0: [to_b], 1: []}) as mesh:
        a, b = mesh.relays
        await mesh.settle_gossip()
        await peering(a).pause(b_url, ["out"])
        await a.ingest(mixed_workload(30, seed=51, now_ms=PAST_MS))  # overflows the queue
        head = await a.store.log_length()
        out = peering(a).ledger.get(b_url, "out")
        assert out.state == "paused" and int(out.applied_token or 0) < head

        await peering(a).resume(b_url, ["out"])
        await mesh.settle_gossip()
        out = peering(a).ledger.get(b_url, "out")
        assert out.state == "repairing" and int(out.applied_token or 0) < head
        assert not await cids(a) <= await cids(b)  # gossip alone lost ops for it

        report = await peering(a).repair.run_once(b_url)
        assert report is not None and report.ok
        out = peering(a).ledger.get(b_url, "out")
        assert (out.state, out.applied_token) == ("live", str(head))
        assert await cids(a) <= await cids(b)
