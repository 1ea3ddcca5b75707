"""The pending buffer is visible to operators (additive): ``GET
/operations/pending`` counts waiting ops by dependency kind and age bucket,
and the copies waiting beside them, and names the oldest; ``/metrics``
carries the same counts, the oldest age and a per-reason rejection counter.
In-process and over hypercorn, on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS, get_json, post
from tests.support.served import TRANSPORTS, Served, served_relay

MINUTE_MS = 60_000


@pytest.fixture(params=TRANSPORTS)
async def served(store: RelayStore, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    async with served_relay(store, request.param) as s:
        yield s


def empty_ages() -> dict[str, int]:
    return {"<1m": 0, "1m-1h": 0, "1h-1d": 0, ">=1d": 0, "unknown": 0}


async def test_an_empty_buffer(served: Served) -> None:
    overview = await get_json(served.client, "/operations/pending")
    assert overview == {
        "at": served.clock.now_ms,
        "total": 0,
        "unverified": 0,
        "copies": 0,
        "byDependency": {
            "op": {"count": 0, "ages": empty_ages()},
            "did": {"count": 0, "ages": empty_ages()},
            "policy": {"count": 0, "ages": empty_ages()},
        },
        "oldest": None,
    }


async def test_counts_by_dependency_kind_and_age_and_the_oldest(served: Served) -> None:
    client, clock = served.client, served.clock
    b = WorkloadBuilder(seed=171, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    first = b.content_create(alice)
    oldest = b.content_update(first)
    second = b.content_create(bob)
    b.content_update(second)
    [alice_genesis, _, _, first_update, second_create, second_update] = b.tokens
    await post(client, [first_update])  # waits for alice (did)
    clock.advance(2 * 60 * MINUTE_MS)  # two hours
    await post(client, [second_create])  # waits for bob (did)
    await post(client, [alice_genesis])  # first_update now waits for its chain's genesis
    clock.advance(2 * MINUTE_MS)
    await post(client, [second_update])  # waits for bob (did)
    head, _, signature = second_update.rpartition(".")
    await post(client, [f"{head}.{'A' * len(signature)}"])  # a forged copy of it
    overview = await get_json(client, "/operations/pending")
    assert overview["at"] == clock.now_ms
    assert (overview["total"], overview["copies"]) == (3, 1)
    op_ages = {**empty_ages(), "1h-1d": 1}  # first_update, parked two hours ago
    did_ages = {**empty_ages(), "<1m": 1, "1m-1h": 1}
    assert overview["byDependency"] == {
        "op": {"count": 1, "ages": op_ages},
        "did": {"count": 2, "ages": did_ages},
        "policy": {"count": 0, "ages": empty_ages()},
    }
    assert overview["oldest"] == {
        "cid": oldest,
        "waitingFor": f"op:{first.genesis_cid}",
        "since": clock.now_ms - 122 * MINUTE_MS,
        "ageSeconds": 122 * 60,
    }


async def test_metrics_show_pending_by_dependency_oldest_age_and_rejections(
    served: Served,
) -> None:
    client, clock = served.client, served.clock
    b = WorkloadBuilder(seed=172, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    await post(client, b.tokens[2:])  # the update waits for alice's keys
    head, _, signature = b.tokens[2].rpartition(".")
    await post(client, [f"{head}.{'A' * len(signature)}"])  # a forged copy waits beside it
    future = WorkloadBuilder(seed=173, start_ms=clock.now_ms + 3 * 86_400_000)
    future.identity()
    future.identity()
    await post(client, future.tokens)
    await post(client, ["not a token"])
    clock.advance(90_000)
    text = (await client.get("/metrics")).text
    assert 'dfos_relay_pending_by_dependency{dependency="did"} 1.0' in text
    assert 'dfos_relay_pending_by_dependency{dependency="op"} 0.0' in text
    assert 'dfos_relay_pending_by_dependency{dependency="none"} 0.0' in text
    assert 'dfos_relay_pending_by_dependency{dependency="copy"} 1.0' in text
    assert "dfos_relay_pending_oldest_age_seconds 90.0" in text
    assert 'dfos_relay_rejections_total{reason="future-timestamp"} 2.0' in text
    assert 'dfos_relay_rejections_total{reason="malformed"} 1.0' in text
    # an op that only waits for a dependency is not counted as rejected
    assert 'reason="missing-key"' not in text and 'reason="missing-identity"' not in text


async def test_an_op_parked_by_a_clock_ahead_of_ours_is_young_not_unknown(
    served: Served,
) -> None:
    # Workers on other hosts, or this one's clock stepped back (NTP): its
    # since is a little ahead of our now. Its age is "<1m"; "unknown" is for
    # ops waiting since before the relay recorded such times.
    client, clock = served.client, served.clock
    b = WorkloadBuilder(seed=174, start_ms=PAST_MS)
    alice = b.identity()
    b.content_create(alice)
    await post(client, b.tokens[1:])  # waits for alice
    clock.advance(-2000)
    overview = await get_json(client, "/operations/pending")
    assert overview["byDependency"]["did"] == {"count": 1, "ages": {**empty_ages(), "<1m": 1}}
    assert overview["oldest"]["ageSeconds"] == 0
