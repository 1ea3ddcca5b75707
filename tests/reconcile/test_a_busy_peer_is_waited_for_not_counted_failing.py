"""A peer that answers a round "busy" (503 with ``Retry-After``: it runs its
bound of long rounds, ``MAX_LONG_ROUNDS``) is no faulty peer: the run sends
the round again after the seconds it asked for and completes, the link
counts no failure and the backoff does not grow; the busy answers are
counted (``dfos_relay_reconcile_busy_total``) and named in the in-link's
diagnostics. A peer busy past the run's bound (``busy_waits``) fails the
run, and is backed off and shown failing like any other. Before, the
first 503 failed the run and backed the peer off. ``dfos-relay
reconcile`` says so in one line.

Real relays on loopback; the peer is made busy by holding its places for
long rounds, and the runs' rounds are long ones (~1,100 ops on each side,
none in common: a round of more than 256 ranges)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from peer.base import PeerConfig
from relay import Relay, create_relay
from relay.asgi import store_from_url
from relay.cli.reconcile import ReconcileCommandError, reconcile_command
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.reconcile.initiator import ReconcileBounds
from relay.reconcile.server import MAX_LONG_ROUNDS
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS

OPS = 1100  # each side, none in common: the second round is over 256 ranges
BACKOFF_S = 20.0  # a failed run waits 10..20 s: longer than any test here


@contextlib.contextmanager
def busy(relay: Relay) -> Iterator[None]:
    """Every place for a long round taken: one more is a 503 (Retry-After 1)."""
    with contextlib.ExitStack() as places:
        for _ in range(MAX_LONG_ROUNDS):
            places.enter_context(relay.long_rounds.held())
        yield


async def seeded(store: RelayStore, seed: int) -> RelayStore:
    async with create_relay(store).running() as relay:
        await relay.ingest(mixed_workload(OPS, seed=seed, now_ms=PAST_MS))
    return store


def follower(store: RelayStore, url: str, bounds: ReconcileBounds) -> Relay:
    peer = PeerConfig(url, gossip=False, read_through=False, sync=False, reconcile=True)
    config = PeeringConfig(
        reconcile_interval_s=None,  # the run after start only
        backoff_base_s=BACKOFF_S,
        backoff_max_s=BACKOFF_S,
        reconcile_bounds=bounds,
    )
    return create_relay(store, peering=build_peering([peer], None, config))


def peering(relay: Relay) -> Peering:
    assert isinstance(relay.peering, Peering)
    return relay.peering


async def cids(relay: Relay) -> set[str]:
    return {e.cid for e in await relay.store.read_seq_range(0, 10**9, 10**6)}


def refused(relay: Relay) -> float:
    sample = relay.metrics.registry.get_sample_value(
        "dfos_relay_http_request_duration_seconds_count",
        {"method": "POST", "route": "/sync/negentropy", "status": "503"},
    )
    return sample or 0.0


def busy_answers(relay: Relay, url: str) -> float:
    sample = relay.metrics.registry.get_sample_value(
        "dfos_relay_reconcile_busy_total", {"peer": url}
    )
    return sample or 0.0


async def until(done: object, seconds: float) -> None:
    assert callable(done)
    ends = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < ends, "waited too long"
        await asyncio.sleep(0.02)


async def test_a_peer_busy_for_a_while_is_waited_for_and_not_counted_failing() -> None:
    source = create_relay(await seeded(MemoryStore(), seed=501))
    async with serve_on_loopback(source.app) as url:
        relay = follower(await seeded(MemoryStore(), seed=502), url, ReconcileBounds())
        async with serve_on_loopback(relay.app):
            with busy(source):
                await until(lambda: refused(source) >= 1, 20)
            # the places are free again: the run goes on after the Retry-After
            repair = peering(relay).repair
            await until(lambda: url in repair.last, 30)
        report = repair.last[url]
        assert report.ok, report.error
        assert report.busy >= 1 and report.busy_waited_s >= 1.0  # Retry-After: 1
        assert await cids(source) == await cids(relay)  # both ways, in one run
        assert peering(relay).backoff.failures(url) == 0
        link = peering(relay).ledger.get(url, "in")
        assert (link.failures, link.last_error) == (0, None)
        assert link.diagnostics["busy"]["answers"] == report.busy
        assert busy_answers(relay, url) == report.busy


async def test_a_peer_always_busy_is_counted_failing_and_backed_off() -> None:
    source = create_relay(MemoryStore())
    async with serve_on_loopback(source.app) as url:
        await source.ingest(mixed_workload(OPS, seed=503, now_ms=PAST_MS))
        relay = follower(await seeded(MemoryStore(), seed=504), url, ReconcileBounds(busy_waits=1))
        with busy(source):
            async with serve_on_loopback(relay.app):
                repair = peering(relay).repair
                await until(lambda: url in repair.last, 20)
                report = repair.last[url]
                assert not report.ok and report.busy == 2  # one waited out, one more
                assert f"{url}: peer busy: answered HTTP 503" in (report.error or "")
                assert peering(relay).backoff.failures(url) == 1
                assert peering(relay).backoff.delay(url) > 5
                link = peering(relay).ledger.get(url, "in")
                assert link.failures == 1 and "busy" in (link.last_error or "")
                assert busy_answers(relay, url) == 2


async def test_the_reconcile_command_says_a_peer_is_busy_in_one_line(tmp_path: Path) -> None:
    source = create_relay(MemoryStore())
    async with serve_on_loopback(source.app) as url:
        await source.ingest(mixed_workload(OPS, seed=505, now_ms=PAST_MS))
        store_url = f"sqlite:///{tmp_path / 'relay.db'}"
        await seeded(store_from_url(store_url), seed=506)
        with busy(source), pytest.raises(ReconcileCommandError) as failed:
            await reconcile_command(url, store_url, "both", None, False, store_source="--store")
    line = str(failed.value)
    assert line.startswith(f"{url}: peer busy: answered HTTP 503 with Retry-After")
    assert "\n" not in line and "try again later" in line


@pytest.mark.parametrize(
    ("status", "retry_after", "busy"),
    [(503, "1", True), (429, "1", True), (503, None, False),
     (503, "Sat, 28 Nov 2026 10:00:00 GMT", False)],
    ids=["503 with seconds", "429 with seconds", "503 without", "503 with a date"],
)  # fmt: skip
async def test_only_a_refusal_naming_seconds_to_wait_is_busy(
    status: int, retry_after: str | None, busy: bool
) -> None:
    asked = 0

    async def negentropy(request: Request) -> Response:
        nonlocal asked
        asked += 1
        if asked == 1:
            headers = {} if retry_after is None else {"Retry-After": retry_after}
            return JSONResponse({"error": "not now"}, status_code=status, headers=headers)
        return Response(b"\x61", media_type="application/octet-stream")  # nothing differs

    app = Starlette(routes=[Route("/sync/negentropy", negentropy, methods=["POST"])])
    async with serve_on_loopback(app) as url, create_relay(MemoryStore()).running() as relay:
        report = await relay.reconcile(url, "pull")
    if busy:
        assert (report.ok, report.busy, asked) == (True, 1, 2), report.error
    else:  # a fault, as before: the run fails at once
        assert (report.ok, report.busy, asked) == (False, 0, 1)
        assert f"HTTP {status} not now" in (report.error or "")
