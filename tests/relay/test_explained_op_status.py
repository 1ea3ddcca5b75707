"""Explained op status (additive): ``GET /operations/{cid}/status`` and
``POST /operations/status`` answer ``sequenced`` (seq, chain), ``waiting``
(the exact dependency and since when), ``rejected`` (reason and detail) or
``unknown``. An op answered "missing dependency" becomes ``sequenced`` once
the dependency arrives, without being posted again. In-process and over
hypercorn, on every store."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from relay import RelayConfig
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS, get_json, log_cids, post
from tests.support.served import START_MS, TRANSPORTS, Served, served_relay


@pytest.fixture(params=TRANSPORTS)
async def served(store: RelayStore, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    async with served_relay(store, request.param) as s:
        yield s


async def status(client: httpx.AsyncClient, cid: str) -> dict[str, Any]:
    return await get_json(client, f"/operations/{cid}/status")  # type: ignore[no-any-return]


async def test_missing_dependency_waits_then_is_sequenced_without_reposting(
    served: Served,
) -> None:
    client, clock = served.client, served.clock
    b = WorkloadBuilder(seed=161, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    update = b.content_update(chain)
    [genesis_token, create_token, update_token] = b.tokens

    [answer] = await post(client, [update_token])
    assert answer["status"] == "rejected" and "missing dependency" in answer["error"]
    assert await status(client, update) == {
        "cid": update,
        "status": "waiting",
        "waitingFor": f"did:{alice.did}",  # alice's keys are not known yet
        "dependency": {"kind": "did", "id": alice.did},
        "since": clock.now_ms,
    }
    first_waited = clock.now_ms
    clock.advance(5_000)
    await post(client, [genesis_token])  # the update now waits for the chain's genesis
    assert await status(client, update) == {
        "cid": update,
        "status": "waiting",
        "waitingFor": f"op:{chain.genesis_cid}",
        "dependency": {"kind": "op", "id": chain.genesis_cid},
        "since": first_waited,  # waiting since it first waited
    }
    await post(client, [create_token])  # wakes the update
    log = await log_cids(client)
    for cid, kind, chain_type, chain_id in [
        (alice.head_cid, "identity-op", "identity", alice.did),
        (chain.genesis_cid, "content-op", "content", chain.content_id),
        (update, "content-op", "content", chain.content_id),
    ]:
        assert await status(client, cid) == {
            "cid": cid,
            "status": "sequenced",
            "seq": log.index(cid) + 1,
            "kind": kind,
            "chainType": chain_type,
            "chainId": chain_id,
        }


async def test_rejection_reason_and_detail_then_the_genuine_token_wins(served: Served) -> None:
    client = served.client
    b = WorkloadBuilder(seed=162, start_ms=PAST_MS)
    alice = b.identity()
    [genuine] = b.tokens
    other = WorkloadBuilder(seed=163, start_ms=PAST_MS)
    other.identity()
    head, payload, _ = genuine.split(".")
    forged = f"{head}.{payload}.{other.tokens[0].split('.')[2]}"  # someone else's signature

    [answer] = await post(client, [forged])
    assert answer["status"] == "rejected"
    explained = await status(client, alice.head_cid)
    assert explained == {
        "cid": alice.head_cid,
        "status": "rejected",
        "reason": "bad-signature",
        "detail": answer["error"],
        "rejectedAt": served.clock.now_ms,
        "tokenHash": hashlib.sha256(forged.encode()).hexdigest(),
    }
    assert (await post(client, [genuine]))[0]["status"] == "new"
    assert (await status(client, alice.head_cid))["status"] == "sequenced"


async def test_a_buffered_op_rejected_when_woken_is_explained(served: Served) -> None:
    client = served.client
    b = WorkloadBuilder(seed=164, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    intruder = b.content_update(chain, signer=bob)  # bob holds no write credential
    [alice_genesis, bob_genesis, create, intruding] = b.tokens
    await post(client, [bob_genesis, intruding])
    assert (await status(client, intruder))["waitingFor"] == f"op:{chain.genesis_cid}"
    await post(client, [alice_genesis, create])
    explained = await status(client, intruder)
    assert explained["status"] == "rejected"
    assert explained["reason"] == "unauthorized"


async def test_future_timestamps_are_explained(served: Served) -> None:
    b = WorkloadBuilder(seed=165, start_ms=served.clock.now_ms + 3 * 86_400_000)
    alice = b.identity()
    [answer] = await post(served.client, b.tokens)
    explained = await status(served.client, alice.head_cid)
    assert (explained["status"], explained["reason"]) == ("rejected", "future-timestamp")
    assert explained["detail"] == answer["error"]


async def test_unknown_and_bad_cids(served: Served) -> None:
    b = WorkloadBuilder(seed=166, start_ms=PAST_MS)
    never_posted = b.identity().head_cid
    assert await status(served.client, never_posted) == {"cid": never_posted, "status": "unknown"}
    for bad in ("not-a-cid", "bafy", never_posted[:-2]):
        response = await served.client.get(f"/operations/{bad}/status")
        assert response.status_code == 400 and "error" in response.json()


async def test_batch_status_answers_each_position(served: Served) -> None:
    client = served.client
    b = WorkloadBuilder(seed=167, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    ghost = b.identity().head_cid  # built, never posted
    await post(client, b.tokens[:1])
    await post(client, b.tokens[1:2])
    cids = [alice.head_cid, chain.genesis_cid, ghost, alice.head_cid]
    response = await client.post("/operations/status", json={"cids": cids})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["cid"] for r in results] == cids
    assert [r["status"] for r in results] == ["sequenced", "sequenced", "unknown", "sequenced"]
    hundred = await client.post("/operations/status", json={"cids": [ghost] * 100})
    assert hundred.status_code == 200 and len(hundred.json()["results"]) == 100


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{nope", id="not-json"),
        pytest.param(b"[]", id="not-an-object"),
        pytest.param(b"[" * 5000 + b"]" * 5000, id="nested-too-deep"),
        pytest.param(b'{"operations": []}', id="no-cids"),
        pytest.param(b'{"cids": "bafy"}', id="not-a-list"),
        pytest.param(b'{"cids": []}', id="empty"),
        pytest.param(b'{"cids": [1]}', id="not-a-string"),
        pytest.param(b'{"cids": ["not-a-cid"]}', id="not-a-cid"),
    ],
)
async def test_batch_status_refuses_malformed_bodies(served: Served, body: bytes) -> None:
    response = await served.client.post("/operations/status", content=body)
    assert response.status_code == 400 and "error" in response.json()


async def test_batch_status_refuses_more_than_100(served: Served) -> None:
    cid = WorkloadBuilder(seed=168, start_ms=PAST_MS).identity().head_cid
    response = await served.client.post("/operations/status", json={"cids": [cid] * 101})
    assert response.status_code == 400 and "100" in response.json()["error"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_rejection_notes_are_bounded(store: RelayStore, transport: str) -> None:
    config = RelayConfig(max_rejection_notes=2)
    async with served_relay(store, transport, config) as served:
        b = WorkloadBuilder(seed=169, start_ms=served.clock.now_ms + 3 * 86_400_000)
        cids = [b.identity().head_cid for _ in range(3)]
        for token in b.tokens:  # one request each: three rejections, oldest first
            await post(served.client, [token])
        states = [(await status(served.client, cid))["status"] for cid in cids]
        assert states == ["unknown", "rejected", "rejected"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_full_buffer_is_explained(store: RelayStore, transport: str) -> None:
    async with served_relay(store, transport, RelayConfig(max_pending=1)) as served:
        b = WorkloadBuilder(seed=170, start_ms=PAST_MS)
        alice = b.identity()
        first, second = b.content_create(alice), b.content_create(alice)
        await post(served.client, [b.tokens[1]])
        [answer] = await post(served.client, [b.tokens[2]])
        assert (await status(served.client, first.genesis_cid))["status"] == "waiting"
        explained = await status(served.client, second.genesis_cid)
        assert (explained["status"], explained["reason"]) == ("rejected", "buffer-full")
        assert explained["detail"] == answer["error"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_waiting_since_and_notes_survive_a_restart(store: RelayStore, transport: str) -> None:
    b = WorkloadBuilder(seed=171, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    bad = WorkloadBuilder(seed=172, start_ms=START_MS + 10 * 86_400_000)
    rejected = bad.identity().head_cid
    async with served_relay(store, transport) as served:
        await post(served.client, b.tokens[1:])
        await post(served.client, bad.tokens)  # still in the future a day later
        parked_at = served.clock.now_ms
    # the same store, a relay started a day later: its drain parks the op again
    async with served_relay(store, transport, start_ms=parked_at + 86_400_000) as served:
        waiting = await status(served.client, chain.genesis_cid)
        assert (waiting["status"], waiting["since"]) == ("waiting", parked_at)
        assert (await status(served.client, rejected))["reason"] == "future-timestamp"


async def test_an_op_received_but_not_yet_verified_is_waiting_for_nothing_yet(
    served: Served,
) -> None:
    b = WorkloadBuilder(seed=173, start_ms=PAST_MS)
    alice = b.identity()
    # as another worker sharing the store leaves it between buffering and sequencing
    await served.relay.store.put_raw_ops([(alice.head_cid, b.tokens[0])])
    assert await status(served.client, alice.head_cid) == {
        "cid": alice.head_cid,
        "status": "waiting",
        "waitingFor": None,
        "since": None,
        "detail": "received, not verified yet",
    }
    overview = await get_json(served.client, "/operations/pending")
    assert (overview["total"], overview["unverified"], overview["oldest"]) == (1, 1, None)
