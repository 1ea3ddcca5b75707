"""A run pushes at most ``ReconcileBounds.max_have`` ids (draft section 9):
a peer that claims to lack everything names our whole store, which a run
would otherwise hold and push at once. Past the bound the run stops
collecting, pushes what it found (read from the store a thousand at a
time) and says it was cut short; pushing stops at the first batch the peer
takes none of (rejects whole, or answers as held already though it said it
lacked it); an honest difference larger than the bound converges over
successive runs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay import Relay, create_relay
from relay.reconcile.initiator import ReconcileBounds
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from stores.memory import MemoryStore
from tests.reconcile.hostile_responder import hostile, lacks_everything
from tests.support.relay_api import PAST_MS

OPS = 1200


@pytest.fixture
async def relay(store: RelayStore) -> AsyncIterator[Relay]:
    r = create_relay(store)
    async with r.running():
        await r.ingest(mixed_workload(OPS, seed=77, now_ms=PAST_MS))
        yield r


class Taker:
    """Answers every pushed op with ``status``, and counts the pushes."""

    def __init__(self, status: str, reason: str | None = None) -> None:
        self.status, self.reason = status, reason
        self.posts = 0
        self.ops = 0

    def __call__(self, tokens: list[str]) -> list[dict[str, object]]:
        self.posts += 1
        self.ops += len(tokens)
        extra = {} if self.reason is None else {"reason": self.reason, "error": "no"}
        return [{"cid": "-", "status": self.status, **extra} for _ in tokens]


class Mixed(Taker):
    """Answers half of each push ``duplicate``, half ``rejected`` for good."""

    def __init__(self) -> None:
        super().__init__("duplicate")

    def __call__(self, tokens: list[str]) -> list[dict[str, object]]:
        results = super().__call__(tokens)
        refused = {"status": "rejected", "reason": "bad-signature", "error": "no"}
        return [r if i % 2 else {"cid": "-", **refused} for i, r in enumerate(results)]


async def _claim(_: bytes) -> bytes:
    return lacks_everything()


async def test_a_peer_that_lacks_everything_is_pushed_at_most_the_bound(relay: Relay) -> None:
    bounds = ReconcileBounds(max_have=500)
    taker = Taker("new")
    async with hostile(_claim, submit=taker) as url:
        report = await relay.reconcile(url, "push", bounds=bounds)
    # without the bound: all ~1,200 ops in 13 posts
    assert (report.have, report.pushed, taker.ops, taker.posts) == (500, 500, 500, 5)
    assert report.accepted == 500 and report.cut_short
    assert "more than 500 ids to push in one run" in (report.error or "")


async def test_pushing_stops_at_the_first_batch_the_peer_rejects_whole(relay: Relay) -> None:
    taker = Taker("rejected", "bad-signature")
    async with hostile(_claim, submit=taker) as url:
        report = await relay.reconcile(url, "push")
    assert taker.posts == 1 and report.pushed == 100  # without: every op, in 13 posts
    assert not report.cut_short and not report.accepted
    left = report.have - 100
    assert report.error == f"peer rejected all 100 ops of a push ({left} more not pushed)"


async def test_pushing_stops_at_the_first_batch_the_peer_held_already(relay: Relay) -> None:
    taker = Taker("duplicate")  # it said it lacked them: its word was false
    async with hostile(_claim, submit=taker) as url:
        report = await relay.reconcile(url, "push")
    assert taker.posts == 1 and report.pushed == 100  # without: every op, in 13 posts
    assert not report.cut_short and not report.accepted
    left = report.have - 100
    assert report.error == (
        f"peer already held all 100 ops of a push it said it lacked ({left} more not pushed)"
    )


async def test_a_last_push_the_peer_held_already_is_not_held_against_it() -> None:
    relay = create_relay(MemoryStore())  # a small difference: gossip can bring it meanwhile
    taker = Taker("duplicate")
    async with relay.running(), hostile(_claim, submit=taker) as url:
        await relay.ingest(mixed_workload(40, seed=78, now_ms=PAST_MS))
        report = await relay.reconcile(url, "push")
    assert report.ok and taker.posts == 1 and report.pushed == report.have < 100


async def test_pushing_stops_at_a_batch_the_peer_took_none_of(relay: Relay) -> None:
    mixed = Mixed()  # duplicates and refusals, nothing taken or parked
    async with hostile(_claim, submit=mixed) as url:
        report = await relay.reconcile(url, "push")
    assert mixed.posts == 1 and report.pushed == 100  # without: every op, in 13 posts
    assert report.error is not None and report.error.startswith("peer took none of 100 ops")


async def test_ops_the_peer_parks_for_a_dependency_are_not_a_refusal(relay: Relay) -> None:
    taker = Taker("rejected", "missing-previous")  # a windowed run can leave one out
    async with hostile(_claim, submit=taker) as url:
        report = await relay.reconcile(url, "push")
    assert report.ok and report.pushed == report.have == taker.ops > 1000


async def test_an_honest_push_over_the_bound_converges_run_by_run() -> None:
    source, mirror = create_relay(MemoryStore()), create_relay(MemoryStore())
    bounds = ReconcileBounds(max_have=100)
    async with serve_on_loopback(source.app), serve_on_loopback(mirror.app) as url:
        await source.ingest(mixed_workload(400, seed=407, now_ms=PAST_MS))
        first = await source.reconcile(url, "push", bounds=bounds)
        assert first.have == first.pushed == 100 and first.accepted > 0 and first.cut_short
        runs = 1
        while (await source.reconcile(url, "push", bounds=bounds)).error is not None:
            runs += 1
            assert runs < 30
        assert runs >= 4
        held = {e.cid for e in await source.store.read_seq_range(0, 10**9, 10**6)}
        pushed = {e.cid for e in await mirror.store.read_seq_range(0, 10**9, 10**6)}
        assert held <= pushed
