"""Ops a peer parked when we pushed them (answered as waiting for a
dependency) are not pushed to it again: its item set is its log, so it
names them as lacking in every run until they sequence, and it wakes them
itself when the dependency lands. Remembered per peer for a while and in
bounded number (``relay.reconcile.parked``); then pushed again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay import Relay, create_relay
from relay.reconcile.answers import ParkedAtPeers
from relay.reconcile.server import Window
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from stores.memory import MemoryStore
from tests.reconcile.hostile_responder import hostile, lacks_everything
from tests.reconcile.test_ids_to_push_are_bounded_per_run import Taker
from tests.support.relay_api import PAST_MS
from tests.support.waiting_ops import chain_with_a_gap


@pytest.fixture
async def relay(store: RelayStore) -> AsyncIterator[Relay]:
    r = create_relay(store)
    async with r.running():
        yield r


async def test_a_windowed_run_does_not_push_again_what_the_peer_parked(relay: Relay) -> None:
    mirror = create_relay(MemoryStore())
    _, _, tokens = chain_with_a_gap(seed=81)  # identity, genesis, update 1, update 2
    cids = [r.cid for r in await relay.ingest(tokens)]
    # createdAt ticks a second an op from PAST_MS: the window holds update 2 only
    recent = Window(since=PAST_MS + 4000)
    async with serve_on_loopback(mirror.app) as url:
        await mirror.ingest(tokens[:2])
        first = await relay.reconcile(url, "push", recent)  # and our relay's own ops
        assert first.ok and first.pushed == first.have and first.parked == 1

        again = await relay.reconcile(url, "push", recent)
        assert again.ok and again.have == 1  # the mirror still lacks it in its log
        assert (again.pushed, again.held_back) == (0, 1)  # before: pushed again, every run

        full = await relay.reconcile(url, "push")  # its dependency goes, and wakes it there
        assert full.ok and (full.have, full.pushed, full.held_back) == (2, 1, 1)
        for cid in cids:
            assert await mirror.store.get_operation(cid) is not None


async def _claim(_: bytes) -> bytes:
    return lacks_everything()


async def test_a_peer_parking_everything_is_pushed_it_once_per_expiry(relay: Relay) -> None:
    await relay.ingest(mixed_workload(300, seed=82, now_ms=PAST_MS))
    now = [0.0]
    relay.parked_at_peers = ParkedAtPeers(ttl_s=60, clock=lambda: now[0])
    taker = Taker("rejected", "missing-previous")
    async with hostile(_claim, submit=taker) as url:
        first = await relay.reconcile(url, "push")
        posts, ops = taker.posts, taker.ops
        assert first.ok and first.pushed == first.parked == first.have == ops > 200

        again = await relay.reconcile(url, "push")
        assert again.ok and again.held_back == again.have == ops
        assert (taker.posts, taker.ops) == (posts, ops)  # before: every op again

        now[0] = 61.0  # forgotten: its buffer may have lost them
        late = await relay.reconcile(url, "push")
        assert late.ok and late.pushed == ops and taker.ops == 2 * ops


def test_memory_is_bounded_per_peer_oldest_first() -> None:
    now = [0.0]
    parked = ParkedAtPeers(ttl_s=10, per_peer=3, clock=lambda: now[0])
    parked.remember("a", ["1", "2"])
    now[0] = 5
    parked.remember("a", ["3", "4"])
    parked.remember("b", ["1"])
    assert [parked.parked("a", c) for c in "1234"] == [False, True, True, True]
    assert parked.count("a") == 3 and parked.parked("b", "1")
    now[0] = 10  # 1 and 2 expire
    assert not parked.parked("a", "2") and parked.parked("a", "3")
    parked.remember("a", ["5"])
    assert parked.count("a") == 3  # "2" went when it expired, and nothing else went
    parked.forget("a", ["3"])
    assert not parked.parked("a", "3") and parked.parked("a", "4")
    now[0] = 15
    parked.remember("a", [])  # expired entries are dropped as others come
    assert parked.count("a") == 1  # only "5" (until 20)


def test_memory_is_bounded_over_all_peers_the_largest_forgets_first() -> None:
    now = [0.0]
    parked = ParkedAtPeers(ttl_s=10, per_peer=4, clock=lambda: now[0], in_all=6)
    parked.remember("a", ["1", "2", "3", "4"])
    parked.remember("b", ["1", "2"])
    assert parked.count() == 6
    parked.remember("c", ["1", "2"])  # two over: "a" (the most) forgets its two oldest
    assert parked.count() == 6 and parked.count("a") == 2 and parked.count("c") == 2
    assert [parked.parked("a", c) for c in "1234"] == [False, False, True, True]
    parked.forget("b", ["1", "2", "9"])
    assert parked.count() == 4 and parked.count("b") == 0
    now[0] = 10  # all expire; each is dropped as it is asked about
    assert not parked.parked("a", "3") and parked.count() == 3
