"""WEB-RELAY.md "Countersignatures": the target must exist (a countersign
waits for it), witness != author, one per witness per target (a second is a
duplicate), deleted witnesses are rejected; the two read routes."""

from __future__ import annotations

import httpx

from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, post, statuses


async def test_countersign_waits_for_its_target(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=91, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    target = b.artifact(alice)
    cs = b.countersign(bob, target)
    ga, gb, art, cs_token = b.tokens
    await post(client, [ga, gb])
    [waiting] = await post(client, [cs_token])
    assert waiting["status"] == "rejected" and target in waiting["error"]
    assert "missing dependency" in waiting["error"]
    await get_json(client, f"/countersignatures/{target}", status=404)
    assert statuses(await post(client, [art])) == ["new"]
    body = await get_json(client, f"/countersignatures/{target}")
    assert body == {"cid": target, "operationCID": target, "countersignatures": [cs_token]}
    op = await get_json(client, f"/operations/{cs}")
    assert op["kind"] == "countersign" and op["chainId"] == target


async def test_witness_must_not_be_the_author(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=92, start_ms=PAST_MS)
    alice = b.identity()
    target = b.artifact(alice)
    b.countersign(alice, target)
    results = await post(client, b.tokens)
    assert statuses(results) == ["new", "new", "rejected"]
    assert "author" in results[2]["error"]


async def test_one_countersign_per_witness_per_target(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=93, start_ms=PAST_MS)
    alice, bob, carol = b.identity(), b.identity(), b.identity()
    chain = b.content_create(alice)
    first = b.countersign(bob, chain.genesis_cid)
    b.countersign(bob, chain.genesis_cid)  # same witness, same target, new CID
    b.countersign(carol, chain.genesis_cid)
    results = await post(client, b.tokens)
    assert statuses(results) == ["new"] * 5 + ["duplicate", "new"]
    body = await get_json(client, f"/operations/{chain.genesis_cid}/countersignatures")
    assert body["operationCID"] == chain.genesis_cid
    assert sorted(body["countersignatures"]) == sorted([b.tokens[4], b.tokens[6]])
    await get_json(client, f"/operations/{results[5]['cid']}", status=404)
    assert results[4]["cid"] == first


async def test_countersign_of_any_kind_of_target(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=94, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    beacon = b.beacon(alice)
    first = b.countersign(bob, alice.head_cid)  # an identity op
    b.countersign(bob, beacon)
    b.countersign(alice, first)  # a countersign of a countersign
    assert statuses(await post(client, b.tokens)) == ["new"] * 6
    for target in (alice.head_cid, beacon, first):
        body = await get_json(client, f"/countersignatures/{target}")
        assert len(body["countersignatures"]) == 1


async def test_deleted_witness_is_rejected(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=95, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    target = b.artifact(alice)
    await post(client, b.tokens)
    b.tokens.clear()
    b.delete_identity(bob)
    await post(client, b.tokens)
    b.tokens.clear()
    b.countersign(bob, target)
    [result] = await post(client, b.tokens)
    assert result["status"] == "rejected" and "deleted" in result["error"]


async def test_read_routes_404(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=96, start_ms=PAST_MS)
    alice = b.identity()
    await post(client, b.tokens)
    missing = "bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
    for path in (f"/countersignatures/{missing}", f"/operations/{missing}/countersignatures"):
        response = await client.get(path)
        assert response.status_code == 404 and "error" in response.json()
    # A known op without countersignatures: the op-scoped route answers [].
    body = await get_json(client, f"/operations/{alice.head_cid}/countersignatures")
    assert body == {"operationCID": alice.head_cid, "countersignatures": []}
    # v0.7.1: the target-scoped route also answers a known op with [] (not 404).
    body = await get_json(client, f"/countersignatures/{alice.head_cid}")
    assert body == {
        "cid": alice.head_cid,
        "operationCID": alice.head_cid,
        "countersignatures": [],
    }
