"""Sync-echo suppression between real relays: an op a peer sent us is never
pushed back to it, whether it came by gossip, live follow or reconciliation.
Pushes are counted at the transport (every POST /operations, with the
relay push headers)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from peer import PeerConfig
from peer.asgi import RecordedPost
from relay.testing.workload import mixed_workload
from tests.peering.mesh import Mesh, assert_converged, in_process_mesh, post_all
from tests.support.relay_api import PAST_MS


def echoes(mesh: Mesh, posts: Sequence[RecordedPost]) -> list[tuple[str, str, str]]:
    """(from, to, token) for every push of a token to a relay that had
    finished pushing that same token to the sender before the push began."""
    url_of = {relay.did: url for relay, url in zip(mesh.relays, mesh.urls, strict=True)}
    received: dict[tuple[str, str], dict[str, int]] = {}  # (receiver, sender) -> token -> ended
    for post in posts:
        sender = url_of.get(post.sender)
        if sender is not None and post.status == 200:
            seen = received.setdefault((post.target, sender), {})
            for token in post.tokens:
                seen[token] = min(seen.get(token, post.ended), post.ended)
    found = []
    for post in posts:
        sender = url_of.get(post.sender)
        if sender is None:
            continue
        sent_us = received.get((sender, post.target), {})
        found += [
            (sender, post.target, t) for t in post.tokens if sent_us.get(t, 1 << 62) < post.started
        ]
    return found


async def test_gossip_never_pushes_an_op_back_to_the_relay_that_pushed_it(
    tmp_path: Path,
) -> None:
    tokens = mixed_workload(120, seed=11, now_ms=PAST_MS)
    async with in_process_mesh(
        tmp_path, 3, record_posts=True, gossip=True, read_through=False, sync=False
    ) as mesh:
        await mesh.resolve_peers()
        await post_all(mesh.http, mesh.urls[0], tokens)
        await mesh.settle_gossip()
        await assert_converged(mesh)
        posts = mesh.transport.posts
        relay_pushes = [p for p in posts if p.sender is not None]
    assert relay_pushes, "the relays gossiped"
    # every relay push named its sender, and each sender is one of the relays
    assert {mesh.index_of_did(p.sender) for p in relay_pushes} <= {0, 1, 2}
    assert echoes(mesh, posts) == []
    # the origin hears nothing back about its own ops
    back_to_origin = [t for p in relay_pushes if p.target == mesh.urls[0] for t in p.tokens]
    assert not set(back_to_origin) & set(tokens[:40])  # the early ops had long arrived


async def test_ops_learned_by_live_follow_are_not_gossiped_back(tmp_path: Path) -> None:
    tokens = mixed_workload(60, seed=12, now_ms=PAST_MS)
    urls = [f"http://relay-{c}.test" for c in "ab"]
    peers = {
        0: [],
        1: [PeerConfig(urls[0], gossip=True, read_through=False, sync=False, live=True)],
    }
    async with in_process_mesh(tmp_path, 2, record_posts=True, peers=peers) as mesh:
        await mesh.resolve_peers()
        await post_all(mesh.http, mesh.urls[0], tokens)
        await mesh.peering(1).sync.sync_peer(mesh.urls[0])  # caught up, whatever the feed did
        await mesh.settle_gossip()
        await assert_converged(mesh)
        to_a = [
            t
            for p in mesh.transport.posts
            if p.target == mesh.urls[0] and p.sender
            for t in p.tokens
        ]
    assert not set(to_a) & set(tokens)


async def test_reconcile_does_not_push_back_what_the_peer_sent_us(tmp_path: Path) -> None:
    from_a = mixed_workload(30, seed=13, now_ms=PAST_MS)
    own = mixed_workload(30, seed=14, now_ms=PAST_MS)
    async with in_process_mesh(
        tmp_path, 2, record_posts=True, gossip=False, read_through=False, sync=False
    ) as mesh:
        a_url = mesh.urls[0]
        b = mesh.relays[1]
        # B holds ops A sent it (as sync-in or a reconcile pull would hand them
        # over) and ops of its own; A, say rebuilt since, holds neither
        await b.ingest(from_a, source=a_url)
        await b.ingest(own)
        report = await b.reconcile(a_url, direction="push")
        pushed = {t for p in mesh.transport.posts if p.target == a_url for t in p.tokens}
    assert report.ok, report.error
    assert set(own) <= pushed  # what A lacks and did not send us is pushed...
    assert not pushed & set(from_a)  # ...what it sent us is not
    assert all(p.sender == b.did for p in mesh.transport.posts)


async def test_the_sender_header_is_trusted_for_routing_only(tmp_path: Path) -> None:
    from peer.base import FANOUT_HOP_HEADER, RELAY_SENDER_HEADER
    from tests.peering.faulty import tamper

    tokens = mixed_workload(10, seed=15, now_ms=PAST_MS)
    async with in_process_mesh(
        tmp_path, 3, record_posts=True, gossip=True, read_through=False, sync=False
    ) as mesh:
        await mesh.resolve_peers()
        await mesh.settle_gossip()
        a, b_did = mesh.urls[0], mesh.relays[1].did
        # a forged push "from B": its ops are verified all the same
        forged = {RELAY_SENDER_HEADER: b_did, FANOUT_HOP_HEADER: "2"}
        body = {"operations": [tamper(tokens[0])]}
        answer = (await mesh.http.post(a + "/operations", json=body, headers=forged)).json()
        assert answer["results"][0]["status"] == "rejected"
        # a sender DID that is no peer of A's is a client: A originates the ops
        stranger = {RELAY_SENDER_HEADER: "did:dfos:nobodyweknow", FANOUT_HOP_HEADER: "2"}
        response = await mesh.http.post(
            a + "/operations", json={"operations": tokens}, headers=stranger
        )
        assert response.status_code == 200
        await mesh.settle_gossip()
        await assert_converged(mesh)
