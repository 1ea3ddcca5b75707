"""Ban and unban a DID: its new ops are refused with the reason ``banned``
on the client's result line, its existing ops stay served, the ban is
stored (it survives a restart and reaches every relay sharing the store),
and ``purge`` removes what it signed and what hangs off it, recorded and
reported, leaving a store that audits clean."""

from __future__ import annotations

import asyncio
from typing import Any

from relay import create_relay
from relay.admin import BAN_REFRESH_S
from relay.audit import audit_store
from relay.config import RelayConfig
from relay.feed import FeedGone, Subscription, filter_from_query
from relay.rules.outcomes import Status
from stores.base import RelayStore
from tests.stores.conftest import reopen
from tests.support.waiting_ops import identity_update_with_a_gap, signed_by

from .conftest import World


async def _until_gone(subscription: Subscription) -> FeedGone:
    with subscription:
        try:
            async for _ in subscription.messages():
                pass
        except FeedGone as gone:
            return gone
    raise AssertionError("the live subscription ended without a 410")


async def ban(world: World, did: str, **body: Any) -> dict[str, Any]:
    response = await world.admin("PUT", f"/admin/bans/{did}", body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_a_banned_signer_is_refused_with_the_reason_on_its_result_line(
    world: World,
) -> None:
    alice = world.alice
    body = await ban(world, alice.did, reason="spam")
    assert body["did"] == alice.did and body["reason"] == "spam" and body["purge"] is None
    assert body["bannedBy"] == world.operator.did and body["bannedAtMs"] == world.clock()
    beacon = world.beacon(alice)
    post = world.builder.content_create(alice)
    results = await world.post([beacon, world.builder.tokens[-1]])
    for line in results:
        assert line["status"] == "rejected" and line["reason"] == "banned"
        assert alice.did in line["error"] and "spam" in line["error"]
    assert post.content_id
    # what it signed before the ban stays served
    assert (await world.client.get(f"/identities/{alice.did}")).status_code == 200
    # others are not affected
    other = await world.post([world.beacon(world.bob)])
    assert other[0]["status"] == "new"
    response = await world.admin("DELETE", f"/admin/bans/{alice.did}")
    assert response.status_code == 200 and response.json() == {"did": alice.did, "banned": False}
    assert [r["status"] for r in await world.post([beacon])] == ["new"]
    assert [line["outcome"] for line in world.audits("ban") + world.audits("unban")] == [
        "ok",
        "ok",
    ]


async def test_a_banned_signers_op_that_cannot_be_verified_yet_is_refused_not_kept(
    world: World,
) -> None:
    """Its identity is not here (never was, or purged): the op could only wait
    for it, holding a slot of the buffer; it is refused as banned at once."""
    b = world.builder
    stranger = b.identity()
    b.tokens.pop()  # its genesis is never sent
    await ban(world, stranger.did, reason="spam")
    b.artifact(stranger)
    b.beacon(stranger)
    results = await world.post(b.tokens[-2:])
    assert [(r["status"], r["reason"]) for r in results] == [("rejected", "banned")] * 2
    pending = (await world.client.get("/operations/pending")).json()
    assert pending["total"] == 0
    status = (await world.client.get(f"/operations/{results[0]['cid']}/status")).json()
    assert status["status"] == "rejected" and status["reason"] == "banned"


async def test_bans_are_listed_stored_and_reach_every_relay_on_the_store(
    world: World, store: RelayStore
) -> None:
    other = create_relay(reopen(store), config=RelayConfig())
    if other.store is world.relay.store:
        other.store.close = _no_close  # type: ignore[method-assign]
    async with other.running():
        await ban(world, world.alice.did, reason="abuse")
        listed = (await world.admin("GET", "/admin/bans")).json()["bans"]
        assert [(b["did"], b["reason"]) for b in listed] == [(world.alice.did, "abuse")]
        assert listed[0]["purged"] == {"operations": 0, "byKind": {}}
        await asyncio.sleep(BAN_REFRESH_S + 0.2)  # the other relay re-reads its bans
        refused = await other.ingest([world.beacon(world.alice)])
        assert refused[0].status is Status.REJECTED and refused[0].reason is not None
        assert refused[0].reason.value == "banned"
    again = create_relay(reopen(store), config=RelayConfig())
    if again.store is world.relay.store:
        again.store.close = _no_close  # type: ignore[method-assign]
    async with again.running():  # a restart reads the stored ban
        refused = await again.ingest([world.beacon(world.alice)])
        assert refused[0].reason is not None and refused[0].reason.value == "banned"


async def _no_close() -> None:
    """The in-memory store is shared by the second relay: only the world closes it."""


async def test_a_purge_removes_what_the_did_signed_and_what_hangs_off_it(world: World) -> None:
    b, alice, bob = world.builder, world.alice, world.bob
    start = len(b.tokens)
    mine = b.content_create(alice)
    b.content_update(mine)
    delegated = b.content_update(mine, bob, authorization=b.write_credential(alice, bob))
    theirs = b.content_create(bob)
    grant = b.write_credential(bob, alice, theirs.content_id)
    alice_in_theirs = b.content_update(theirs, alice, authorization=grant)
    after_alice = b.content_update(theirs, bob)  # descends from alice's op
    bob_head_before = theirs.ops[0][0]
    b.beacon(alice)
    b.artifact(alice)
    sig_of_alice = b.countersign(bob, mine.genesis_cid)
    b.countersign(alice, theirs.genesis_cid)
    kept_sig = b.countersign(world.outsider, theirs.genesis_cid)
    results = await world.post(b.tokens[start:])
    assert {r["status"] for r in results} == {"new"}, results
    epoch = (await world.client.get("/.well-known/dfos-relay")).json()["changesFeed"]["epoch"]
    live = await world.relay.feed.open(
        filter_from_query([("live", "true")], None), "sse", "http://relay/changes?mode=bootstrap"
    )
    following = asyncio.create_task(_until_gone(live))

    body = await ban(world, alice.did, reason="abuse", purge=True)
    # the feed knows at once, and a live follower of the old epoch is told to bootstrap
    assert world.relay.feed.epoch != epoch
    gone = await asyncio.wait_for(following, 10)
    assert gone.status == 410 and gone.epoch == world.relay.feed.epoch
    purge = body["purge"]
    # alice's identity op, her 2 content ops, the chain's delegated op, her op in bob's
    # chain and its descendant, beacon, artifact, her countersignature and bob's of hers
    assert purge["byKind"] == {"identity-op": 1, "content-op": 5, "beacon": 1, "artifact": 1,
                               "countersign": 2}  # fmt: skip
    assert purge["operations"] == 10
    assert purge["chainsRemoved"] == 2 and purge["chainsRewound"] == 1
    assert purge["firstSeq"] >= 1 and purge["lastSeq"] > purge["firstSeq"]

    for cid in (mine.genesis_cid, delegated, alice_in_theirs, after_alice, sig_of_alice):
        assert (await world.client.get(f"/operations/{cid}")).status_code == 404
    assert (await world.client.get(f"/identities/{alice.did}")).status_code == 404
    assert (await world.client.get(f"/content/{mine.content_id}")).status_code == 404
    theirs_now = (await world.client.get(f"/content/{theirs.content_id}")).json()
    assert theirs_now["headCID"] == bob_head_before  # rewound to what remains
    assert (await world.client.get(f"/operations/{kept_sig}")).status_code == 200
    sigs = (await world.client.get(f"/countersignatures/{theirs.genesis_cid}")).json()
    assert len(sigs["countersignatures"]) == 1
    # recorded and reported
    listed = (await world.admin("GET", "/admin/bans")).json()["bans"][0]
    assert listed["purged"]["operations"] == 10
    line = world.audits("ban")[-1]
    assert line["purge"] is True and line["purged_operations"] == 10
    new_epoch = (await world.client.get("/.well-known/dfos-relay")).json()["changesFeed"]["epoch"]
    assert new_epoch != epoch
    report = await audit_store(world.relay.store)
    assert report.clean, [f.line() for f in report.findings]
    assert report.purged == 10


async def test_what_cannot_be_banned_and_malformed_calls(world: World) -> None:
    cases = [
        ("PUT", f"/admin/bans/{world.relay.did}", {}, 400),
        ("PUT", f"/admin/bans/{world.operator.did}", {}, 400),
        ("PUT", "/admin/bans/not-a-did", {}, 400),
        ("PUT", f"/admin/bans/{world.alice.did}", {"purge": "yes"}, 400),
        ("PUT", f"/admin/bans/{world.alice.did}", {"reason": 7}, 400),
        ("PUT", f"/admin/bans/{world.alice.did}", ["x"], 400),
        ("DELETE", f"/admin/bans/{world.alice.did}", None, 404),
    ]
    for method, path, body, status in cases:
        response = await world.admin(method, path, body)
        assert response.status_code == status, (path, body, response.text)
        assert isinstance(response.json()["error"], str)
    bad_json = await world.client.put(
        f"/admin/bans/{world.alice.did}", content=b"{", headers=world.auth()
    )
    assert bad_json.status_code == 400
    assert {line["outcome"] for line in world.audits("ban")} == {"refused"}
    assert (await world.admin("GET", "/admin/bans")).json() == {"bans": [], "cursor": None}


async def test_a_text_field_holding_nul_is_a_400_and_changes_nothing(world: World) -> None:
    """No backend could keep it alike (Postgres text refuses NUL outright)."""
    response = await world.admin("PUT", f"/admin/bans/{world.alice.did}", {"reason": "a\x00b"})
    assert response.status_code == 400, response.text
    assert response.json() == {"error": "reason must not contain NUL"}
    dropped = await world.admin("POST", "/admin/waiting/drop", {"did": world.alice.did + "\x00"})
    assert dropped.status_code == 400 and "NUL" in dropped.json()["error"]
    listed = await world.admin("GET", "/admin/bans")
    assert listed.json() == {"bans": [], "cursor": None}


async def test_a_purge_keeps_another_signers_copy_of_a_purged_waiting_op(world: World) -> None:
    """Alice's signature of another identity's waiting update holds its CID;
    the purge drops it, and the genuine update, kept beside it as a copy,
    takes its place and is sequenced when update 1 arrives."""
    cid, (genesis, update1, update2) = identity_update_with_a_gap(71)
    await world.post([genesis])
    await world.post([update2])
    await world.post([signed_by(update2, world.alice)])
    body = await ban(world, world.alice.did, reason="forgery", purge=True)
    assert body["purge"]["bufferedDropped"] == 1
    [kept] = await world.relay.store.get_unsequenced(10)
    assert (kept.cid, kept.jws_token) == (cid, update2)
    assert [r["status"] for r in await world.post([update1])] == ["new"]
    assert (await world.client.get(f"/operations/{cid}")).json()["jwsToken"] == update2
