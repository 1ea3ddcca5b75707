"""Ops held in our pending buffer (parked for a dependency) are not fetched
again: the peer's item set is its log, so it names them in every run until
they sequence, and fetching them again neither helps them along nor leaves
room for the rest of the run's bound on ids to fetch. The dependency is
fetched, and the parked op sequences when it lands. Between two relays
served on loopback, over every store backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relay import Relay, create_relay
from relay.reconcile.initiator import ReconcileBounds
from relay.rules.outcomes import Status
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder
from tests.support.backends import make_store, selected_backends
from tests.support.relay_api import PAST_MS
from tests.support.waiting_ops import chain_with_a_gap


@dataclass
class Pair:
    relay: Relay  # over the backend under test
    source: Relay  # served on loopback at ``url``
    url: str


@pytest.fixture(params=selected_backends())
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    (tmp_path / "source").mkdir()
    async with (
        make_store(request.param, tmp_path) as store,
        make_store("memory", tmp_path / "source") as source_store,
    ):
        relay, source = create_relay(store), create_relay(source_store)
        async with relay.running(), serve_on_loopback(source.app) as url:
            yield Pair(relay, source, url)


async def test_a_parked_op_is_not_fetched_again_its_dependency_is(pair: Pair) -> None:
    relay, url = pair.relay, pair.url
    _, waiting_cid, tokens = chain_with_a_gap(seed=71)
    await pair.source.ingest(tokens)
    identity, genesis, _update_1, update_2 = tokens
    parked = await relay.ingest([identity, genesis, update_2])
    assert parked[-1].status is Status.REJECTED  # waits for update 1

    lacking = await _cids(pair.source) - await _cids(relay)  # updates 1 and 2, the source's own

    report = await relay.reconcile(url, "pull")
    assert report.ok, report.error
    assert report.buffered == 1 and report.need == report.fetched == len(lacking) - 1  # before: all
    assert await relay.store.get_operation(waiting_cid) is not None  # sequenced on arrival


async def test_parked_ops_leave_the_bound_on_ids_to_fetch_to_the_rest(pair: Pair) -> None:
    relay, url = pair.relay, pair.url
    b = WorkloadBuilder(seed=72, start_ms=PAST_MS)
    author = b.identity()
    chain = b.content_create(author)
    held_back = b.content_update(chain)  # tokens[2]
    parked = [b.content_update(chain) for _ in range(30)]  # each waits for the one before
    rest = [b.identity() for _ in range(20)]
    await pair.source.ingest(b.tokens)
    await relay.ingest(b.tokens[:2] + b.tokens[3:33])
    assert not {held_back, *parked} & await _cids(relay)

    lacking = await _cids(pair.source) - await _cids(relay)

    # the held-back op, the identities and the source's own fit; with the parked they did not
    bounds = ReconcileBounds(max_need=len(lacking) - 25)
    report = await relay.reconcile(url, "pull", bounds=bounds)
    assert report.ok, report.error
    assert report.need == len(lacking) - 30 and report.buffered == 30
    for cid in [held_back, *parked, *(a.head_cid for a in rest)]:
        assert await relay.store.get_operation(cid) is not None


async def _cids(relay: Relay) -> set[str]:
    return {e.cid for e in await relay.store.read_seq_range(0, 10**9, 10**6)}
