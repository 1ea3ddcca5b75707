"""A scoped mirror ingests only its scope and closure, whatever the peer
serves: a peer that ignores ``scope`` (a real relay behind a front that
drops the parameter, so its scoped pages, feed and item set hold every
valid op it has) fills the mirror with nothing outside the scope, and what
it served outside is counted, per peer, and named on the in-link. An
honest peer's closure still arrives whole, also when the closure grows
while the mirror follows (a dependency sent late, just before its
dependant) and when a page holds a single entry."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest

from peer.base import PeerConfig
from relay import Relay, create_relay
from relay.asgi import store_from_url
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.reconcile import initiator
from relay.scope import Scope, parse_scope
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder
from tests.peering.mesh import FAST, in_process_mesh
from tests.support.relay_api import PAST_MS

from .world import build_world, expected_closure, remove_identity

Asgi = Callable[..., Any]
OFF = {"gossip": False, "read_through": False, "sync": False}


def ignoring_scope(app: Asgi) -> Asgi:
    """``app`` as a peer that ignores ``scope``: every request reaches it
    without the parameter (a v0.7.1 relay would do the same, a hostile one
    anything it likes), so a scoped request is answered with everything."""

    async def front(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
            kept = urlencode([(k, v) for k, v in query if k != "scope"]).encode("latin-1")
            scope = {**scope, "query_string": kept}
        await app(scope, receive, send)

    return front


async def until(check: Callable[[], Any], seconds: float = 20.0) -> Any:
    for _ in range(int(seconds / 0.05)):
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


async def held(relay: Relay) -> set[tuple[str, str]]:
    """(kind, chainId) of every op ``relay`` logged but its own identity."""
    head = await relay.store.log_length()
    entries = await relay.store.read_seq_range(0, head, 10_000)
    return {(e.kind, e.chain_id) for e in entries if e.chain_id != relay.did}


def mirror(url: str, scope: Scope, behaviour: str, config: PeeringConfig = FAST) -> Relay:
    flags = {**OFF, behaviour: True}
    config = replace(config, scope=scope, sync_interval_s=0.2, reconcile_interval_s=0.2)
    peering = build_peering([PeerConfig(url, **flags)], config=config)
    return create_relay(store_from_url("memory://"), peering=peering)


def out_of_scope(relay: Relay, url: str) -> float:
    counted = relay.metrics.registry.get_sample_value(
        "dfos_relay_scope_out_of_scope_total", {"peer": url}
    )
    return counted or 0.0


def in_link(relay: Relay, url: str) -> Any:
    peering = relay.peering
    assert isinstance(peering, Peering)
    return peering.ledger.get(url, "in")


@pytest.mark.parametrize("behaviour", ["sync", "live", "reconcile"])
async def test_a_peer_ignoring_the_scope_fills_the_mirror_with_the_closure_only(
    tmp_path: Path, behaviour: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="dfos_relay.scope")
    world = build_world(seed=61)
    scope = parse_scope(world.chain.content_id)
    serving = create_relay(store_from_url("memory://"))
    async with serve_on_loopback(ignoring_scope(serving.app)) as url:
        await serving.ingest(world.tokens)
        consumer = mirror(url, scope, behaviour)
        async with consumer.running():
            expected = expected_closure(world)

            async def closure_held() -> bool:
                return expected <= await held(consumer)

            await until(closure_held)
            await asyncio.sleep(0.5)  # more cycles, runs, events: still nothing else
            assert await held(consumer) == expected
            assert world.countersign in {
                e.cid for e in await consumer.store.read_seq_range(0, 100, 100)
            }
            # the outsider's identity, beacon and content (4 ops) and the
            # creator's beacon and artifact: left out, counted, on the link
            assert out_of_scope(consumer, url) >= 6
            for cid in world.creator_extras:
                assert await consumer.store.get_operation(cid) is None
            assert in_link(consumer, url).diagnostics["outOfScope"]["ops"] >= 6
            said = [r.getMessage() for r in caplog.records if r.name == "dfos_relay.scope"]
            assert said and all(url in line and "outside scope" in line for line in said)


async def test_a_closure_that_grows_while_the_mirror_follows_arrives_whole(
    tmp_path: Path,
) -> None:
    """The delegate and the witness are identities long before the chain
    needs them: the honest peer's feed sends them late, flagged, just
    before the op that brings them into the closure; the mirror keeps them."""
    b = WorkloadBuilder(seed=62, start_ms=PAST_MS)
    delegate, witness, outsider = b.identity(), b.identity(), b.identity()
    b.beacon(outsider)
    creator = b.identity()
    chain = b.content_create(creator)
    before = list(b.tokens)
    grant = b.write_credential(creator, delegate, chain.content_id)
    b.content_update(chain, delegate, authorization=grant)
    b.countersign(witness, chain.genesis_cid)
    later = b.tokens[len(before) :]
    scope = parse_scope(chain.content_id)
    serving = create_relay(store_from_url("memory://"))
    async with serve_on_loopback(serving.app) as url:
        await serving.ingest(before)
        consumer = mirror(url, scope, "live")
        async with consumer.running():
            start = {("identity-op", creator.did), ("content-op", chain.content_id)}

            async def started() -> bool:
                return await held(consumer) == start and in_link(consumer, url).state == "live"

            await until(started)
            for token in later:  # one at a time: each dependant comes in its own batch
                await serving.ingest([token])
                await asyncio.sleep(0.1)
            grown = start | {
                ("identity-op", delegate.did),
                ("identity-op", witness.did),
                ("countersign", chain.genesis_cid),
            }

            async def whole() -> bool:
                return await held(consumer) == grown

            await until(whole)
            assert out_of_scope(consumer, url) == 0
            assert "outOfScope" not in in_link(consumer, url).diagnostics


@pytest.mark.parametrize("limit", [1, 3])
async def test_an_honest_peer_paged_finely_gives_the_whole_closure(
    tmp_path: Path, limit: int
) -> None:
    world = build_world(seed=63)
    scope = parse_scope(world.chain.content_id)
    serving = create_relay(store_from_url("memory://"))
    async with serve_on_loopback(serving.app) as url:
        await serving.ingest(world.tokens)
        consumer = mirror(url, scope, "sync", replace(FAST, sync_page_limit=limit))
        async with consumer.running():
            expected = expected_closure(world)

            async def whole() -> bool:
                return await held(consumer) == expected

            await until(whole)
            assert out_of_scope(consumer, url) == 0


async def test_a_scoped_pull_keeps_a_closure_op_fetched_before_its_dependant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fetched two at a time, oldest first, the delegate's and the witness's
    identities come batches before the ops that need them: judged again at
    the run's end, they are kept."""
    monkeypatch.setattr(initiator, "MAX_FETCH_CIDS", 2)
    world = build_world(seed=64)
    scope = parse_scope(world.chain.content_id)
    async with in_process_mesh(tmp_path, 2, **OFF) as mesh:
        serving, consumer = mesh.relays
        await serving.ingest(world.tokens)
        report = await consumer.reconcile(mesh.urls[0], "pull", scope=scope)
        assert report.ok, report.error
        assert report.out_of_scope == 0
        again = await consumer.reconcile(mesh.urls[0], "pull", scope=scope)
        assert again.ok and again.need == 0
        assert await held(consumer) == expected_closure(world)


@pytest.mark.parametrize("behaviour", ["live", "reconcile"])
async def test_a_closure_member_owed_before_a_restart_is_taken_after_it(
    tmp_path: Path, behaviour: str
) -> None:
    """The countersignature waits for the witness, whom the serving relay
    lost; the mirror restarts (its memory of what waits is gone, its ledger
    names the witness as missing); the witness comes back on the serving
    side, in log order after everything: the mirror takes it."""
    world = build_world(seed=65)
    scope = parse_scope(world.chain.content_id)
    db = tmp_path / "serving.db"
    serving = create_relay(store_from_url(f"sqlite:///{db}"))
    mirror_store = f"sqlite:///{tmp_path / 'mirror.db'}"
    flags = {**OFF, behaviour: True}
    config = replace(FAST, scope=scope, reconcile_interval_s=0.2)

    def consumer_of(url: str) -> Relay:
        peering = build_peering([PeerConfig(url, **flags)], config=config)
        return create_relay(store_from_url(mirror_store), peering=peering)

    async with serve_on_loopback(serving.app) as url:
        await serving.ingest(world.tokens)
        remove_identity(db, world.witness.did)
        first = consumer_of(url)
        async with first.running():

            async def waits() -> bool:
                missing = in_link(first, url).diagnostics.get("missing")
                return missing == {"identity": [world.witness.did]}

            await until(waits)
        await serving.ingest([world.tokens[1]])  # the witness's genesis, sequenced last
        second = consumer_of(url)
        async with second.running():

            async def countersigned() -> bool:
                return await second.store.get_operation(world.countersign) is not None

            await until(countersigned)
            assert await held(second) == expected_closure(world)
            assert out_of_scope(second, url) == 0
