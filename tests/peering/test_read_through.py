"""Read-through: a local 404 on an identity or content chain asks the
read-through peers for the chain log, ingests it with full verification and
answers from local state; one peer call per chain however many readers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from peer import PeerConfig
from relay.testing.workload import WorkloadBuilder, mixed_workload
from tests.peering.mesh import chains_of, global_log, heads, in_process_mesh
from tests.support.relay_api import PAST_MS

READER_ONLY = {0: [], 1: [PeerConfig("http://relay-a.test", gossip=False, sync=False)]}


async def test_every_chain_reaches_a_reader_by_read_through_alone(tmp_path: Path) -> None:
    tokens = mixed_workload(200, seed=21, now_ms=PAST_MS)
    async with in_process_mesh(tmp_path, 3, gossip=False, read_through=True, sync=False) as mesh:
        await mesh.relays[0].ingest(tokens)
        source_log = await global_log(mesh.http, mesh.urls[0])
        chains = chains_of(source_log)
        for url in mesh.urls[1:]:
            for chain_id, kind in chains.items():
                path = f"/identities/{chain_id}" if kind == "identity" else f"/content/{chain_id}"
                for suffix in ("", "/log"):
                    response = await mesh.http.get(url + path + suffix)
                    assert response.status_code == 200, (url, path, response.text)
        expected = await heads(mesh.http, mesh.urls[0], chains)
        chain_ops = {e["cid"] for e in source_log if e["kind"] in ("identity-op", "content-op")}
        for url in mesh.urls[1:]:
            assert await heads(mesh.http, url, chains) == expected
            got = {e["cid"] for e in await global_log(mesh.http, url)}
            # beacons, artifacts and countersignatures are not read-through targets
            assert chain_ops <= got


async def test_content_read_through_fetches_the_creators_identity(tmp_path: Path) -> None:
    b = WorkloadBuilder(seed=22, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    cred = b.write_credential(alice, bob, chain.content_id)
    b.content_update(chain, bob, authorization=cred)
    b.rotate(alice)
    b.content_update(chain)
    async with in_process_mesh(tmp_path, 2, peers=READER_ONLY) as mesh:
        await mesh.relays[0].ingest(b.tokens)
        response = await mesh.http.get(f"{mesh.urls[1]}/content/{chain.content_id}")
        assert response.status_code == 200, response.text
        assert response.json()["headCID"] == chain.head_cid
        for did in (alice.did, bob.did):
            assert (await mesh.http.get(f"{mesh.urls[1]}/identities/{did}")).status_code == 200


async def test_unknown_everywhere_stays_404(tmp_path: Path) -> None:
    async with in_process_mesh(tmp_path, 3, gossip=False, sync=False) as mesh:
        did = "did:dfos:" + "a" * 22
        response = await mesh.http.get(f"{mesh.urls[0]}/identities/{did}")
        assert response.status_code == 404
        # a plain miss at the peer is an answer, not a failure: no backoff
        assert mesh.peering(0).backoff.ready(mesh.urls[1])


async def test_concurrent_reads_of_one_chain_make_one_peer_call(tmp_path: Path) -> None:
    b = WorkloadBuilder(seed=23, start_ms=PAST_MS)
    alice = b.identity()
    async with in_process_mesh(tmp_path, 2, peers=READER_ONLY) as mesh:
        await mesh.relays[0].ingest(b.tokens)
        reads = mesh.peering(1).reads
        url = f"{mesh.urls[1]}/identities/{alice.did}"
        responses = await asyncio.gather(*(mesh.http.get(url) for _ in range(20)))
        assert [r.status_code for r in responses] == [200] * 20
        assert reads.peer_calls == 1


async def test_read_through_cycles_between_relays_do_not_deadlock(tmp_path: Path) -> None:
    """A and B read through each other; neither knows the chain: fast 404."""
    async with in_process_mesh(tmp_path, 2, gossip=False, sync=False) as mesh:
        did = "did:dfos:" + "b" * 22
        responses = await asyncio.wait_for(
            asyncio.gather(
                mesh.http.get(f"{mesh.urls[0]}/identities/{did}"),
                mesh.http.get(f"{mesh.urls[1]}/identities/{did}"),
            ),
            timeout=2,
        )
        assert [r.status_code for r in responses] == [404, 404]


async def test_a_paused_in_link_is_not_read_through_either(tmp_path: Path) -> None:
    """An operator paused pulling from the peer: nothing is followed, synced
    or pulled, reads included (404 until the link is resumed)."""
    b = WorkloadBuilder(seed=23, start_ms=PAST_MS)
    alice = b.identity()
    async with in_process_mesh(tmp_path, 2, gossip=False, read_through=True, sync=False) as mesh:
        await mesh.relays[0].ingest(b.tokens)
        reader = mesh.relays[1].peering
        assert reader is not None
        await reader.pause(mesh.urls[0], ["in"])
        path = f"{mesh.urls[1]}/identities/{alice.did}"
        assert (await mesh.http.get(path)).status_code == 404
        await reader.resume(mesh.urls[0], ["in"])
        assert (await mesh.http.get(path)).status_code == 200
