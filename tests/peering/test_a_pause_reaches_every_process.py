"""An operator's pause or resume, made through one process on a store,
reaches every other process on it (the workers of one relay, hosts sharing
one Postgres) within a flush interval; and a process that has not heard of
it yet cannot undo it by writing its own view of the link. Two ledgers on
two handles of one real store stand for two processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from relay.admin import admin_audience
from relay.peering.ledger import LinkLedger
from relay.protocol import create_auth_token
from relay.testing.workload import WorkloadBuilder
from stores.base import FULL_SCOPE, RelayStore
from tests.cli.conftest import RelayProcess
from tests.stores.conftest import reopen
from tests.support.relay_api import PAST_MS

URL = "https://peer.example"
EVERY_MS = 50


@pytest.fixture
async def two(store: RelayStore) -> AsyncIterator[tuple[LinkLedger, LinkLedger]]:
    await store.open()
    other = reopen(store)
    if other is not store:
        await other.open()
    first, second = LinkLedger(persist_every_ms=EVERY_MS), LinkLedger(persist_every_ms=EVERY_MS)
    await first.start(store)
    await second.start(other)
    try:
        yield first, second
    finally:
        await first.stop()
        await second.stop()
        if other is not store:
            await other.close()
        await store.close()


async def eventually(check: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(EVERY_MS / 1000)
    return check()


async def test_a_pause_and_a_resume_reach_the_other_process(
    two: tuple[LinkLedger, LinkLedger], store: RelayStore
) -> None:
    operated, other = two
    await other.set_state(URL, "out", "live")  # the other process pushes to the peer
    await operated.pause(URL, ["out"])
    assert await eventually(lambda: other.paused(URL, "out"))
    assert other.get(URL, "out").state == "paused"

    await operated.resume(URL, ["out"])
    assert await eventually(lambda: not other.paused(URL, "out"))
    assert other.get(URL, "out").state == "initial"  # it catches up again


async def test_a_process_that_never_used_the_link_hears_the_pause_too(
    two: tuple[LinkLedger, LinkLedger],
) -> None:
    operated, other = two
    await operated.pause(URL, ["in", "out"])
    assert await eventually(lambda: other.paused(URL, "in") and other.paused(URL, "out"))


async def test_a_process_that_has_not_heard_cannot_undo_a_pause(
    two: tuple[LinkLedger, LinkLedger], store: RelayStore
) -> None:
    operated, other = two
    await other.set_state(URL, "in", "live")
    await operated.pause(URL, ["in"])
    # before its next flush hears of it, the other process writes the link on
    await other.failure(URL, "in", ConnectionError("refused"))
    stored = await store.get_link(URL, FULL_SCOPE, "in")
    assert stored is not None and stored.state == "paused" and stored.failures == 1
    assert await eventually(lambda: other.paused(URL, "in"))


async def test_a_pause_through_a_process_that_does_not_pull_keeps_the_pullers_progress(
    store: RelayStore,
) -> None:
    """The operator's process writes the whole in-link, paused: with the
    progress the pulling process last wrote, not its own older copy (it
    re-reads pulled links only at its flushes, here far apart)."""
    await store.open()
    other = reopen(store)
    if other is not store:
        await other.open()
    puller = LinkLedger(persist_every_ms=EVERY_MS)
    operated = LinkLedger(persist_every_ms=60_000, pulled_elsewhere=[URL])
    await puller.start(store)
    await operated.start(other)
    try:
        await puller.update(URL, "in", received_token="e1.42", applied_token="e1.40")
        await puller.flush()
        await operated.pause(URL, ["in"])
        stored = await store.get_link(URL, FULL_SCOPE, "in")
        assert stored is not None and stored.state == "paused"
        assert (stored.received_token, stored.applied_token) == ("e1.42", "e1.40")
        await puller.update(URL, "in", received_token="e1.50")
        await puller.flush()
        await operated.resume(URL, ["in"])
        stored = await store.get_link(URL, FULL_SCOPE, "in")
        assert stored is not None and (stored.state, stored.received_token) == ("initial", "e1.50")
    finally:
        await puller.stop()
        await operated.stop()
        if other is not store:
            await other.close()
        await store.close()


def test_a_pause_through_one_relay_process_pauses_the_other(tmp_path: Path) -> None:
    """Real processes: two ``dfos-relay serve`` on one SQLite file and a
    gossip peer; the operator pauses the out-link through the first, and
    the second (which pushes what it ingests) shows it paused, then
    resumed."""
    b = WorkloadBuilder(seed=5, start_ms=PAST_MS)
    operator = b.identity()
    peer = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    args = ["--store", f"sqlite:///{tmp_path}/relay.db", "--admin-did", operator.did]
    relays: list[RelayProcess] = []
    try:
        relays = [RelayProcess([*args, "--peer", f"{peer.url}#gossip"]) for _ in range(2)]
        first, second = relays
        with first.explained(), second.explained():
            posted = httpx.post(first.url + "/operations", json={"operations": b.tokens})
            assert {r["status"] for r in posted.json()["results"]} == {"new"}
            relay_did = httpx.get(first.url + "/.well-known/dfos-relay").json()["did"]
            now = int(time.time())
            token = create_auth_token(
                operator.keypair,
                operator.kid,
                operator.did,
                admin_audience(relay_did),
                now - 5,
                now + 120,
            )
            auth = {"Authorization": f"Bearer {token}"}

            def out_state(relay: RelayProcess) -> str:
                peers = httpx.get(relay.url + "/peers", headers=auth, timeout=10).json()["peers"]
                links = [link for p in peers if p["url"] == peer.url for link in p["links"]]
                return next((x["state"] for x in links if x["direction"] == "out"), "none")

            done = httpx.post(
                first.url + "/admin/peers/pause", json={"url": peer.url}, headers=auth
            )
            assert done.status_code == 200, done.text
            assert wait_until(lambda: out_state(second) == "paused"), out_state(second)
            done = httpx.post(
                first.url + "/admin/peers/resume", json={"url": peer.url}, headers=auth
            )
            assert done.status_code == 200, done.text
            assert wait_until(lambda: out_state(second) != "paused"), out_state(second)
    finally:
        for relay in relays:
            relay.stop()
        peer.stop()


def wait_until(check: Callable[[], bool], timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.2)
    return check()
