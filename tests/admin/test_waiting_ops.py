"""Drop buffered (waiting) ops by signer DID, by age, or both: they leave
the raw buffer for good; ops of other signers and younger ops stay, and so
does another signer's token of a dropped op's payload, kept beside it as a
copy: it takes the dropped op's place. An op's age is its CID's."""

from __future__ import annotations

from typing import Any

from tests.support.waiting_ops import (
    chain_with_a_gap,
    forged_signature,
    identity_update_with_a_gap,
    signed_by,
)

from .conftest import World


async def buffered(world: World) -> set[str]:
    return {p.cid for p in await world.relay.store.get_unsequenced(1000)}


async def drop(world: World, **body: Any) -> int:
    response = await world.admin("POST", "/admin/waiting/drop", body)
    assert response.status_code == 200, response.text
    dropped: int = response.json()["dropped"]
    return dropped


def orphan_update(world: World, actor: Any) -> tuple[str, str]:
    """A content op whose parent this relay never sees: it waits."""
    b = world.builder
    chain = b.content_create(actor)
    b.tokens.pop()  # the genesis is withheld
    cid = b.content_update(chain)
    return cid, b.tokens[-1]


async def test_drop_by_signer_and_by_age(world: World) -> None:
    old_alice, token_a = orphan_update(world, world.alice)
    old_bob, token_b = orphan_update(world, world.bob)
    results = await world.post([token_a, token_b])
    assert [r["reason"] for r in results] == ["missing-previous", "missing-previous"]
    world.clock.advance(600)
    new_bob, token_c = orphan_update(world, world.bob)
    await world.post([token_c])
    assert await buffered(world) == {old_alice, old_bob, new_bob}

    assert await drop(world, did=world.alice.did) == 1
    assert await buffered(world) == {old_bob, new_bob}
    assert await drop(world, olderThanSeconds=300) == 1  # only the op buffered 10 min ago
    assert await buffered(world) == {new_bob}
    assert await drop(world, did=world.alice.did, olderThanSeconds=0) == 0
    assert await drop(world, did=world.bob.did, olderThanSeconds=0) == 1
    assert await buffered(world) == set()
    lines = world.audits("drop-waiting")
    assert [line["dropped"] for line in lines] == [1, 1, 0, 1]
    assert lines[1]["older_than_s"] == 300


async def test_a_dropped_op_may_come_back(world: World) -> None:
    cid, token = orphan_update(world, world.alice)
    await world.post([token])
    assert await drop(world, did=world.alice.did) == 1
    again = await world.post([token])
    assert again[0]["reason"] == "missing-previous" and cid in await buffered(world)


async def test_drop_needs_a_did_or_an_age(world: World) -> None:
    for body in ({}, {"olderThanSeconds": -1}, {"olderThanSeconds": True}, {"did": 3}):
        response = await world.admin("POST", "/admin/waiting/drop", body)
        assert response.status_code == 400, body


async def test_dropping_a_signers_op_keeps_another_signers_copy_in_its_place(
    world: World,
) -> None:
    """Alice's signature of another identity's update checks (an identity
    update names no signer), so it holds the CID and the genuine update
    waits beside it as a copy; dropping alice's waiting ops keeps the
    genuine one, which is sequenced when update 1 arrives."""
    cid, (genesis, update1, update2) = identity_update_with_a_gap(61)
    await world.post([genesis])
    await world.post([update2])
    results = await world.post([signed_by(update2, world.alice)])
    assert results[0]["reason"] == "missing-previous"
    assert await drop(world, did=world.alice.did) == 1
    [kept] = await world.relay.store.get_unsequenced(10)
    assert (kept.cid, kept.jws_token) == (cid, update2)
    assert [r["status"] for r in await world.post([update1])] == ["new"]
    assert (await world.client.get(f"/operations/{cid}")).json()["jwsToken"] == update2


async def test_a_drop_by_age_takes_a_cid_whole(world: World) -> None:
    """An op's age is its CID's, how long its payload has waited: a younger
    token of it, kept beside it as a copy, goes with it."""
    _, _, (_, _, _, update2) = chain_with_a_gap(64)
    await world.post([forged_signature(update2, 65)])  # nothing checkable yet: it holds the CID
    world.clock.advance(600)
    await world.post([update2])  # a copy, ten minutes younger
    assert await drop(world, olderThanSeconds=300) == 1
    assert await buffered(world) == set()
    async with world.relay.store.sequencing() as session:
        assert await session.count_pending() == 0
