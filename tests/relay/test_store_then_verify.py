"""WEB-RELAY.md "Convergence" / "Store-Then-Verify": an op whose dependency is
missing is rejected *as a dependency failure* and stays buffered, then is
sequenced as soon as the dependency arrives (later request or same request);
permanent rejections are recorded once and never retried; a flood of invalid
ops does not slow later requests; the buffer is bounded."""

from __future__ import annotations

import time

import httpx

from relay import RelayConfig, create_relay
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, get_json, post, statuses


async def test_missing_previous_is_buffered_then_sequenced(
    client: httpx.AsyncClient, store: RelayStore
) -> None:
    b = WorkloadBuilder(seed=31, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    update = b.content_update(chain)
    genesis_id, genesis_content, update_token = b.tokens
    await post(client, [genesis_id])
    before = await store.count_unsequenced()
    [waiting] = await post(client, [update_token])
    assert waiting["status"] == "rejected" and waiting["cid"] == update
    assert "missing dependency" in waiting["error"] and chain.genesis_cid in waiting["error"]
    assert await store.count_unsequenced() == before + 1
    await get_json(client, f"/operations/{update}", status=404)
    assert statuses(await post(client, [genesis_content])) == ["new"]
    op = await get_json(client, f"/operations/{update}")
    assert op["chainId"] == chain.content_id
    assert await store.count_unsequenced() == before
    # A resubmission of the woken op is now a duplicate.
    assert statuses(await post(client, [update_token])) == ["duplicate"]


async def test_missing_identity_names_the_did(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=32, start_ms=PAST_MS)
    alice = b.identity()
    b.beacon(alice)
    b.artifact(alice)
    results = await post(client, b.tokens[1:])
    for r in results:
        assert r["status"] == "rejected" and alice.did in r["error"]
        assert "missing dependency" in r["error"]
    assert statuses(await post(client, b.tokens[:1])) == ["new"]
    for token_result in results:
        await get_json(client, f"/operations/{token_result['cid']}")


async def test_dependency_arriving_in_the_same_request_answers_new(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=33, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    b.content_update(chain)
    tokens = list(reversed(b.tokens))
    assert statuses(await post(client, tokens)) == ["new"] * 4


async def test_chain_of_waiters_resolves_transitively(
    client: httpx.AsyncClient, store: RelayStore
) -> None:
    b = WorkloadBuilder(seed=34, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    for _ in range(5):
        b.content_update(chain)
    b.countersign(b.identity(), chain.head_cid)
    identity_token, *rest = b.tokens
    # Everything except alice's genesis, one request per op, newest first.
    witness_genesis = rest[-2]
    for token in reversed(rest):
        if token != witness_genesis:
            await post(client, [token])
    await post(client, [witness_genesis])
    assert await store.count_unsequenced() >= 7
    assert statuses(await post(client, [identity_token])) == ["new"]
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == chain.head_cid and content["state"]["length"] == 6
    countersigs = await get_json(client, f"/countersignatures/{chain.head_cid}")
    assert len(countersigs["countersignatures"]) == 1
    assert await store.count_unsequenced() == 0


async def test_permanent_rejection_is_recorded_once_and_never_retried(
    client: httpx.AsyncClient, store: RelayStore
) -> None:
    b = WorkloadBuilder(seed=35, start_ms=PAST_MS)
    alice = b.identity()
    b.delete_identity(alice)
    b.beacon(alice)  # from a deleted identity: permanently rejected
    genesis, delete, beacon = b.tokens
    await post(client, [genesis, delete])
    [first] = await post(client, [beacon])
    assert first["status"] == "rejected" and "missing dependency" not in first["error"]
    assert await store.count_unsequenced() == 0
    [second] = await post(client, [beacon])
    assert second["status"] == "rejected" and second["cid"] == first["cid"]
    await get_json(client, f"/operations/{first['cid']}", status=404)


async def test_flood_of_invalid_ops_does_not_slow_later_requests(client: httpx.AsyncClient) -> None:
    good = WorkloadBuilder(seed=36, start_ms=PAST_MS)
    for _ in range(10):
        good.identity()

    async def timed() -> float:
        started = time.perf_counter()
        await post(client, good.tokens)
        return time.perf_counter() - started

    baseline = min([await timed() for _ in range(3)])  # duplicates after the first
    flood = WorkloadBuilder(seed=37, start_ms=PAST_MS)
    ghost = flood.identity()  # never submitted: everything below waits forever
    chain = flood.content_create(ghost)
    for _ in range(300):
        flood.content_update(chain)
    tokens = flood.tokens[1:]
    for i in range(0, len(tokens), 100):
        await post(client, tokens[i : i + 100])
    after = min([await timed() for _ in range(3)])
    assert after < baseline * 3 + 0.05


async def test_bounded_buffer_answers_buffer_full(store: RelayStore) -> None:
    relay = create_relay(store, config=RelayConfig(max_pending=3))
    async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
        b = WorkloadBuilder(seed=38, start_ms=PAST_MS)
        ghost = b.identity()
        for _ in range(5):
            b.artifact(ghost)
        results = await post(client, b.tokens[1:])
        assert statuses(results) == ["rejected"] * 5
        full = [r for r in results if "buffer" in r["error"]]
        assert len(full) == 2
        assert await store.count_unsequenced() == 3
        # Buffer-full is not permanent: once there is room the op is taken.
        assert statuses(await post(client, b.tokens[:1])) == ["new"]
        retry = await post(client, [b.tokens[1 + results.index(full[0])]])
        assert statuses(retry) == ["new"]


async def test_resubmitted_waiting_ops_answer_their_final_outcome(relay: object) -> None:
    """Ops already buffered by an earlier request and resubmitted in a large
    shuffled batch with their dependencies answer ``new``: each request line
    reports the op's last outcome, whichever wake-up sequenced it."""
    import random

    from relay.engine import Relay
    from relay.testing.workload import mixed_workload

    assert isinstance(relay, Relay)
    tokens = mixed_workload(300, seed=2, now_ms=PAST_MS + 40 * 24 * 3600 * 1000)
    random.Random(1).shuffle(tokens)
    await relay.ingest(tokens[:100])
    results = await relay.ingest(tokens)
    assert {r.status.value for r in results} <= {"new", "duplicate"}, [
        r.error for r in results if r.status.value == "rejected"
    ]
    assert await relay.store.count_unsequenced() == 0
    assert await relay.store.log_length() == len(tokens) + 2  # plus the relay's own two ops
