"""WEB-RELAY.md "Fork Acceptance", PROTOCOL.md "Chain Validity": forks verify
against the state at the fork point; the head is the tip with the highest
createdAt, the highest CID breaking a tie; identity chains fork too."""

from __future__ import annotations

import httpx

from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, log_cids, post, statuses


async def test_fork_from_an_old_op_is_accepted_and_later_tip_wins(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=41, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    b.content_update(chain)
    fork = b.content_update(chain, parent=chain.ops[0])  # from genesis, newest createdAt
    assert statuses(await post(client, b.tokens)) == ["new"] * 5
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == fork
    # Length counts ops along the head's branch: genesis + fork.
    assert content["state"]["length"] == 2
    assert len(await log_cids(client, f"/content/{chain.content_id}/log")) == 4


async def test_fork_verifies_against_fork_point_state(client: httpx.AsyncClient) -> None:
    """A fork from before a content delete is valid; extending the delete is not."""
    b = WorkloadBuilder(seed=42, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    before_delete = chain.ops[1]
    b.content_update(chain, delete=True)
    deleted_tip = (chain.head_cid, chain.head_ms)
    revived = b.content_update(chain, parent=before_delete)
    b.content_update(chain, parent=deleted_tip)  # extends a deleted state
    results = await post(client, b.tokens)
    assert statuses(results) == ["new"] * 5 + ["rejected"]
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == revived and content["state"]["isDeleted"] is False


async def test_equal_created_at_ties_break_on_the_highest_cid(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=43, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    tie_ms = chain.head_ms + 10_000
    first = b.content_update(chain, parent=chain.ops[0], created_ms=tie_ms)
    second = b.content_update(chain, parent=chain.ops[0], created_ms=tie_ms)
    b.content_update(chain, parent=chain.ops[0], created_ms=tie_ms - 1)
    assert statuses(await post(client, b.tokens)) == ["new"] * 5
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == max(first, second)


async def test_identity_forks_pick_the_same_head(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=44, start_ms=PAST_MS)
    alice = b.identity()
    genesis = (alice.head_cid, alice.head_ms)
    genesis_key = alice.keypair
    b.rotate(alice)
    branch_a = alice.head_cid
    # Fork the identity from genesis with the original key (and a later createdAt).
    alice.head_cid, alice.head_ms, alice.keypair = genesis[0], genesis[1], genesis_key
    branch_b = b.rotate(alice)
    assert statuses(await post(client, b.tokens)) == ["new"] * 3
    identity = await get_json(client, f"/identities/{alice.did}")
    assert identity["headCID"] == branch_b != branch_a
    head_keys = [k["publicKeyMultibase"] for k in identity["state"]["controllerKeys"]]
    assert head_keys == [alice.keypair.multikey]
    assert len(await log_cids(client, f"/identities/{alice.did}/log")) == 3


async def test_earlier_fork_does_not_displace_the_head(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=45, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    head = b.content_update(chain)
    b.content_update(chain, parent=chain.ops[0], created_ms=chain.ops[0][1] + 1)
    await post(client, b.tokens)
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == head and content["state"]["length"] == 3
