"""WEB-RELAY.md "Deletion Semantics", bullet by bullet: a deleted identity
stops acting, its history stays verifiable, others may still attest to its
ops, and a later fork from before the delete undeletes it."""

from __future__ import annotations

import httpx

from relay.testing.workload import Actor, WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, post, statuses


async def _deleted(client: httpx.AsyncClient, b: WorkloadBuilder, actor: Actor) -> None:
    """Submit what the builder holds, then (separately) delete ``actor``.

    Separately, because within one batch identity ops sort first, so the
    delete would precede (and reject) the actor's other ops of the batch.
    """
    for _ in range(2):
        if b.tokens:
            assert set(statuses(await post(client, b.tokens))) <= {"new", "duplicate"}
            b.tokens.clear()
        if not actor.deleted:
            b.delete_identity(actor)


async def test_identity_ops_after_delete_are_rejected(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=61, start_ms=PAST_MS)
    alice = b.identity()
    await _deleted(client, b, alice)
    b.rotate(alice)  # extends the delete
    [result] = await post(client, b.tokens)
    assert result["status"] == "rejected"
    identity = await get_json(client, f"/identities/{alice.did}")
    assert identity["state"]["isDeleted"] is True
    # Keys persist in the deleted state so history stays verifiable.
    assert identity["state"]["controllerKeys"]


async def test_content_ops_signed_by_a_deleted_identity_are_rejected(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=62, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    await _deleted(client, b, alice)
    b.content_update(chain)
    b.content_create(alice)
    results = await post(client, b.tokens)
    assert statuses(results) == ["rejected", "rejected"]
    assert all("deleted" in r["error"] for r in results)


async def test_content_chain_of_a_deleted_creator_is_sealed(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=63, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    cred = b.write_credential(alice, bob, chain.content_id)
    before = b.content_update(chain, bob, authorization=cred)
    await post(client, b.tokens)
    b.tokens.clear()
    await _deleted(client, b, alice)
    b.content_update(chain, bob, authorization=cred)  # bob is live, alice is not
    [result] = await post(client, b.tokens)
    assert result["status"] == "rejected" and "deleted" in result["error"]
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == before


async def test_beacons_artifacts_and_countersigns_from_deleted_identities_are_rejected(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=64, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    target = b.artifact(bob)
    await post(client, b.tokens)
    b.tokens.clear()
    await _deleted(client, b, alice)
    b.beacon(alice)
    b.artifact(alice)
    b.countersign(alice, target)
    results = await post(client, b.tokens)
    assert statuses(results) == ["rejected"] * 3
    assert all("deleted" in r["error"] for r in results)
    await get_json(client, f"/beacons/{alice.did}", status=404)


async def test_countersigns_on_ops_by_deleted_authors_are_accepted(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=65, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    target = b.artifact(alice)
    await post(client, b.tokens)
    b.tokens.clear()
    await _deleted(client, b, alice)
    b.countersign(bob, target)
    assert statuses(await post(client, b.tokens)) == ["new"]
    body = await get_json(client, f"/countersignatures/{target}")
    assert body["countersignatures"] == b.tokens


async def test_delegated_credentials_of_a_deleted_issuer_stop_working(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=66, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    await post(client, b.tokens)
    b.tokens.clear()
    cred = b.write_credential(alice, bob, chain.content_id)
    await _deleted(client, b, alice)
    b.content_update(chain, bob, authorization=cred)
    assert statuses(await post(client, b.tokens)) == ["rejected"]


async def test_fork_from_before_the_delete_undeletes(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=67, start_ms=PAST_MS)
    alice = b.identity()
    genesis = (alice.head_cid, alice.head_ms)
    key = alice.keypair
    chain = b.content_create(alice)
    await _deleted(client, b, alice)
    delete_cid = alice.head_cid
    # Fork from genesis with a later createdAt: the fork becomes the head.
    alice.head_cid, alice.head_ms, alice.keypair, alice.deleted = genesis[0], genesis[1], key, False
    revived = b.rotate(alice)
    b.content_update(chain)
    b.beacon(alice)
    assert statuses(await post(client, b.tokens)) == ["new", "new", "new"]
    identity = await get_json(client, f"/identities/{alice.did}")
    assert identity["headCID"] == revived and identity["state"]["isDeleted"] is False
    # The delete stays visible in the log, on a non-head branch.
    log = await get_json(client, f"/identities/{alice.did}/log")
    assert delete_cid in [e["cid"] for e in log["entries"]]
