"""Rendezvous fan-out in a mesh of real relays (memory store, in-process
ASGI transport): an origin pushes each op to its few coordinators, they
forward to their shares, every relay gets every op; with a coordinator down,
reconciliation repairs what its shares missed; discovery learns the mesh."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from peer import PeerConfig
from peer.asgi import RecordedPost
from peer.base import HOP_FORWARDED, HOP_TO_COORDINATOR
from relay.peering.config import PeeringConfig
from relay.peering.rendezvous import coordinators, rank, share_of
from relay.protocol import decode_jws
from relay.testing.workload import mixed_workload
from tests.peering.mesh import (
    FAST,
    Mesh,
    assert_converged,
    global_log,
    in_process_mesh,
    mesh_urls,
    post_all,
)
from tests.support.relay_api import PAST_MS
from tests.support.waiting_ops import other_identities

N = 9  # P = 8 gossip peers each: k = 3 coordinators per op
RENDEZVOUS = replace(FAST, fanout_direct_max=4)
GOSSIP_ONLY = {"gossip": True, "read_through": False, "sync": False}


async def posts_of_one_origin(
    tmp_path: Path, n: int, config: PeeringConfig, tokens: list[str]
) -> tuple[str, list[RecordedPost]]:
    """(the origin's DID, every push) when ``tokens`` are posted to relay 0
    of a converged gossip mesh of ``n``, after its own announcements."""
    async with in_process_mesh(
        tmp_path, n, config=config, record_posts=True, **GOSSIP_ONLY
    ) as mesh:
        await mesh.resolve_peers()
        await mesh.settle_gossip()  # the relays' own announcements
        start = len(mesh.transport.posts)
        await post_all(mesh.http, mesh.urls[0], tokens)
        await mesh.settle_gossip()
        await assert_converged(mesh)
        return mesh.relays[0].did, mesh.transport.posts[start:]


async def test_every_relay_gets_every_op_with_few_pushes_from_the_origin(tmp_path: Path) -> None:
    tokens = mixed_workload(60, seed=21, now_ms=PAST_MS)
    origin, posts = await posts_of_one_origin(tmp_path, N, RENDEZVOUS, tokens)
    workload = set(tokens)
    from_origin = Counter(t for p in posts if p.sender == origin for t in p.tokens if t in workload)
    by_relays = Counter(t for p in posts if p.sender for t in p.tokens if t in workload)
    peers = N - 1
    assert set(from_origin) == workload
    assert max(from_origin.values()) <= math.ceil(math.log2(peers)) + 1
    assert max(from_origin.values()) == 3  # k = ceil(log2 8)
    # no flooding: each peer received each op about once (coordinator or share)
    assert max(by_relays.values()) <= peers
    hops = {(p.sender == origin, p.hop) for p in posts if p.sender and set(p.tokens) & workload}
    assert hops == {(True, HOP_TO_COORDINATOR), (False, HOP_FORWARDED)}


async def test_direct_push_below_the_threshold_floods_as_before(tmp_path: Path) -> None:
    tokens = mixed_workload(30, seed=22, now_ms=PAST_MS)
    direct = replace(FAST, fanout_direct_max=1000)
    origin, posts = await posts_of_one_origin(tmp_path, 6, direct, tokens)
    from_origin = Counter(t for p in posts if p.sender == origin for t in p.tokens)
    assert set(from_origin.values()) == {5}  # every peer, directly
    assert all(p.hop is None for p in posts)


@asynccontextmanager
async def posted_while_one_is_down(
    tmp_path: Path, config: PeeringConfig, seed: int
) -> AsyncIterator[tuple[Mesh, str]]:
    """A settled mesh of ``N`` to whose relay 0 a workload was posted while
    relay 3 was down (still down): (the mesh, relay 3's URL)."""
    tokens = mixed_workload(60, seed=seed, now_ms=PAST_MS)
    async with in_process_mesh(tmp_path, N, config=config, **GOSSIP_ONLY) as mesh:
        await mesh.resolve_peers()
        await mesh.settle_gossip()
        down = mesh.urls[3]
        mesh.transport.down(down)
        await post_all(mesh.http, mesh.urls[0], tokens)
        await mesh.settle_gossip()
        yield mesh, down


async def test_a_coordinator_down_leaves_gaps_that_reconciliation_repairs(tmp_path: Path) -> None:
    async with posted_while_one_is_down(tmp_path, RENDEZVOUS, 23) as (mesh, down):
        mesh.transport.up(down)
        have = [{e["cid"] for e in await global_log(mesh.http, url)} for url in mesh.urls]
        # gossip alone left holes beyond the down relay: its shares missed ops
        others = [i for i in range(1, N) if i != 3]
        assert any(have[i] != have[0] for i in others)
        for i in range(1, N):
            report = await mesh.relays[i].reconcile(mesh.urls[0])
            assert report.ok, report.error
        await mesh.settle_gossip()
        await assert_converged(mesh)
        assert mesh.peering(0).fanout.not_forwarded == 0


async def test_a_forward_lost_to_a_down_peer_holds_the_coordinators_watermark(
    tmp_path: Path,
) -> None:
    """A coordinator's forwards count on its out-links like its own pushes:
    one it gave up on leaves that link repairing, held below the op, until
    a reconciliation pushed to the peer."""
    config = replace(RENDEZVOUS, gossip_max_attempts=2)
    async with posted_while_one_is_down(tmp_path, config, 24) as (mesh, down):
        coordinators = [i for i in range(1, N) if i != 3 and mesh.peering(i).fanout.forwarded]
        held = [
            i for i in coordinators
            if mesh.peering(i).out_links.watermark(down) < mesh.peering(i).out_links.head
        ]  # fmt: skip
        assert held, "some coordinator lost forwards to the down peer"
        for i in held:
            assert mesh.peering(i).ledger.get(down, "out").state == "repairing"
        mesh.transport.up(down)
        for i in held:  # the repair path of the reconcile behaviour (and of the admin call)
            for _ in range(2):  # the first also pulls the peer's own ops: the head moves on
                report = await mesh.peering(i).repair.run_once(down)
                assert report is not None and report.ok, report
                await mesh.settle_gossip()  # what those ops set off is forwarded
            out_links = mesh.peering(i).out_links
            assert out_links.watermark(down) == out_links.head
            assert mesh.peering(i).ledger.get(down, "out").state == "live"


async def test_a_forward_the_queue_had_no_room_for_holds_only_the_links_of_its_share(
    tmp_path: Path,
) -> None:
    """A coordinator whose forward queue is full drops a forward: the
    links of that op's share are held below it, repairing; every other
    link (the origin's, the other coordinators') stays live, its watermark
    moving with the head."""
    actors, tokens = other_identities(31, count=12)  # independent ops
    config = replace(RENDEZVOUS, fanout_forward_queue_max=1)
    async with in_process_mesh(tmp_path, N, config=config, **GOSSIP_ONLY) as mesh:
        await mesh.resolve_peers()
        await mesh.settle_gossip()
        index = {r.did: i for i, r in enumerate(mesh.relays)}
        peers = [r.did for r in mesh.relays[1:]]  # relay 0's advertised peers
        ranked = [rank(peers, actor.did, actor.head_cid) for actor in actors]
        # relay c coordinates op a (which fills its forward queue) and op b (dropped)
        c, a, b = next(
            (index[did], a, b)
            for a in range(len(actors))
            for b in range(a + 1, len(actors))
            for did in coordinators(ranked[a])
            if did in coordinators(ranked[b])
        )
        share_dids = share_of(mesh.relays[c].did, peers, actors[b].did, actors[b].head_cid)
        share = {mesh.urls[index[did]] for did in share_dids or ()}
        assert share, "the dropped op is forwarded to some peers"
        await mesh.peering(c).fanout.stop()  # the forwarder: the queue fills
        for j in (a, b):
            await post_all(mesh.http, mesh.urls[0], [tokens[j]])
            await mesh.peering(0).flushed()
        out_links = mesh.peering(c).out_links
        dropped_below = out_links.head  # op b's seq at c
        assert mesh.peering(c).fanout.not_forwarded == 1
        mesh.peering(c).fanout.start()
        later = [tokens[j] for j in range(len(actors)) if j not in (a, b)]
        await post_all(mesh.http, mesh.urls[0], later)
        await mesh.settle_gossip()
        assert out_links.head > dropped_below
        for url in mesh.peering(c).gossip.lanes:
            state = mesh.peering(c).ledger.get(url, "out").state
            if url in share:
                assert (out_links.watermark(url), state) == (dropped_below - 1, "repairing"), url
            else:
                assert (out_links.watermark(url), state) == (out_links.head, "live"), url


async def test_a_coordinator_seen_failing_is_stood_in_for_so_its_share_still_gets_ops(
    tmp_path: Path,
) -> None:
    first = mixed_workload(30, seed=24, now_ms=PAST_MS)
    later = mixed_workload(60, seed=25, now_ms=PAST_MS + 10**9)
    async with in_process_mesh(
        tmp_path, N, config=RENDEZVOUS, record_posts=True, **GOSSIP_ONLY
    ) as mesh:
        await mesh.resolve_peers()
        await mesh.settle_gossip()
        down = mesh.urls[3]
        mesh.transport.down(down)
        await post_all(mesh.http, mesh.urls[0], first)  # the origin learns relay 3 fails
        for _ in range(200):
            if not mesh.peering(0).gossip.healthy(down):
                break
            await asyncio.sleep(0.01)
        assert not mesh.peering(0).gossip.healthy(down)
        await post_all(mesh.http, mesh.urls[0], later)
        await mesh.settle_gossip()
        later_cids = {decode_jws(t).header["cid"] for t in later}
        others = [url for i, url in enumerate(mesh.urls[1:], 1) if i != 3]
        missing: dict[str, int] = {}
        for _ in range(100):  # forwards of ops that waited for a dependency come later
            await mesh.settle_gossip()
            have = [{e["cid"] for e in await global_log(mesh.http, url)} for url in others]
            missing = {url: len(later_cids - h) for url, h in zip(others, have, strict=True)}
            if not any(missing.values()):
                break
            await asyncio.sleep(0.1)
        assert not any(missing.values()), missing  # no holes: stand-ins forwarded the share
        assert mesh.peering(0).fanout.stood_in > 0
        stand_in_hops = {p.hop for p in mesh.transport.posts if p.hop and p.hop.startswith("1:")}
        assert stand_in_hops == {"1:" + mesh.relays[3].did}  # standing in for relay 3 only


async def test_discovery_learns_the_peers_of_peers_within_its_bound(tmp_path: Path) -> None:
    urls = mesh_urls(5)
    hub = [PeerConfig(u, **GOSSIP_ONLY) for u in urls[1:]]
    spoke = [PeerConfig(urls[0], **GOSSIP_ONLY)]
    peers = {0: hub, **{i: spoke for i in range(1, 5)}}
    config = replace(RENDEZVOUS, peer_discovery=True, peer_discovery_max=2)
    async with in_process_mesh(tmp_path, 5, config=config, peers=peers) as mesh:
        await mesh.resolve_peers()  # the hub learns its spokes' DIDs...
        await mesh.resolve_peers()  # ...and the spokes read them in its 'peers'
        for i in range(1, 5):
            learned = mesh.peering(i).learned
            assert len(learned) == 2, learned  # bounded
            assert urls[i] not in learned and urls[0] not in learned  # not itself, no dup
            assert set(mesh.peering(i).gossip.lanes) == {urls[0], *learned}
            assert set(learned.values()) <= {r.did for r in mesh.relays}
        assert mesh.peering(0).learned == {}  # nothing new to learn
        # operators see them: GET /peers lists them after the configured peer, marked
        listed = (await mesh.http.get(urls[1] + "/peers")).json()["peers"]
        assert [p["url"] for p in listed] == [urls[0], *mesh.peering(1).learned]
        assert [p.get("discovered") for p in listed] == [
            None,
            *({"did": did} for did in mesh.peering(1).learned.values()),
        ]
        assert [p["behaviours"] for p in listed[1:]] == [["gossip"], ["gossip"]]
        with pytest.raises(KeyError):  # gossip only: not reconciled on demand
            await mesh.relays[1].trigger_reconcile(listed[1]["url"])
        # the learned lanes carry gossip: an op posted to a spoke reaches all
        tokens = mixed_workload(10, seed=24, now_ms=PAST_MS)
        await post_all(mesh.http, urls[1], tokens)
        await mesh.settle_gossip()
        await assert_converged(mesh)


async def test_the_well_known_document_advertises_gossip_peers(tmp_path: Path) -> None:
    async with in_process_mesh(tmp_path, 3, **GOSSIP_ONLY) as mesh:
        await mesh.resolve_peers()
        doc = (await mesh.http.get(mesh.urls[0] + "/.well-known/dfos-relay")).json()
    assert doc["peers"] == [
        {"url": mesh.urls[1], "did": mesh.relays[1].did},
        {"url": mesh.urls[2], "did": mesh.relays[2].did},
    ]
