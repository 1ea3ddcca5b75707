"""A buffered op the write policy failed on (``policy-error``) is kept, and
the relay tries it again by itself: once the policy answers, the op is
sequenced without being sent again and without a restart.

- its status says it waits for the write policy, not for a dependency
  that is met, and the pending overview counts it under ``policy``;
- the retry backs off (``retry_first_s`` doubling up to ``retry_max_s``):
  a policy that always fails is asked a bounded number of times;
- the retry is the relay's task: stopping the relay cancels it;
- a copy (another token of a waiting op's CID) the policy fails on is kept
  like its op: here the buffered op is a forgery, rejected when woken, and
  the genuine copy the policy failed on takes its place and is retried."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import replace

from relay import Relay, create_relay
from relay.ingest.policy import VerifiedOp, WritePolicy
from relay.rules.outcomes import RejectReason, Status
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore, waits_for_policy
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, get_json
from tests.support.waiting_ops import (
    chain_with_a_gap,
    forged_signature,
    identity_update_with_a_gap,
)

FAST = {"retry_first_s": 0.05, "retry_max_s": 0.2}


class FailsOn:
    """A policy that raises on ``cid`` until ``recovered``, counting its calls."""

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.recovered = False
        self.calls: list[float] = []

    def __call__(self, op: VerifiedOp, signer: str) -> None:
        if op.cid == self.cid:
            self.calls.append(time.monotonic())
            if not self.recovered:
                raise RuntimeError("policy backend unreachable")


def _use(relay: Relay, policy: Callable[[VerifiedOp, str], None], **retry: float) -> None:
    relay.gate.policy = replace(WritePolicy(policy, "fails_on"), timeout_s=0.5, **retry)


async def _until(check: Callable[[], object], within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():  # type: ignore[misc]
        assert time.monotonic() < deadline, "not within the deadline"
        await asyncio.sleep(0.02)


async def _kept(relay: Relay, policy: FailsOn) -> list[str]:
    """An op waits for its parent; the parent arrives while the policy fails
    on the op. Returns the tokens (identity, genesis, update 1, update 2)."""
    _, waiting_cid, tokens = chain_with_a_gap(seed=71)
    identity, genesis, update1, update2 = tokens
    assert policy.cid == waiting_cid
    first = await relay.ingest([identity, genesis, update2])
    assert first[2].reason is RejectReason.MISSING_PREVIOUS  # answered: waiting
    assert [r.status for r in await relay.ingest([update1])] == [Status.NEW]
    assert await relay.store.get_operation(waiting_cid) is None
    return tokens


def _waiting_cid() -> str:
    return chain_with_a_gap(seed=71)[1]


async def test_a_kept_op_is_sequenced_once_the_policy_answers(store: RelayStore) -> None:
    policy = FailsOn(_waiting_cid())
    relay = create_relay(store)
    async with relay.running():
        _use(relay, policy, **FAST)
        await _kept(relay, policy)
        await _until(lambda: _calls_at_least(policy, 3))  # failed again on retries
        policy.recovered = True
        await _until(lambda: relay.store.get_operation(policy.cid))
        assert await relay.store.count_unsequenced() == 0
        [status] = await relay.status.explain_many([policy.cid])
        assert status.location is not None  # sequenced, and in the log


async def test_what_waited_for_a_kept_op_follows_it(store: RelayStore) -> None:
    b = WorkloadBuilder(seed=73, start_ms=PAST_MS)
    author = b.identity()
    chain = b.content_create(author)
    b.content_update(chain)
    kept, last = b.content_update(chain), b.content_update(chain)
    identity, genesis, update1, update2, update3 = b.tokens
    policy = FailsOn(kept)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity, genesis, update2, update3])  # both wait
        _use(relay, policy, **FAST)
        assert [r.status for r in await relay.ingest([update1])] == [Status.NEW]
        found = await relay.store.find_buffered([kept, last])
        assert found[kept].waits_for == waits_for_policy(kept)
        assert found[last].waits_for == f"op:{kept}"  # not met: it still waits
        policy.recovered = True
        await _until(lambda: relay.store.get_operation(last))
        assert await relay.store.count_unsequenced() == 0
        seq = {cid: (await relay.status.explain_many([cid]))[0].location for cid in (kept, last)}
        assert seq[kept] is not None and seq[last] is not None
        assert seq[kept].seq < seq[last].seq  # in causal order


async def _calls_at_least(policy: FailsOn, n: int) -> bool:
    return len(policy.calls) >= n


async def test_a_kept_op_reads_as_waiting_for_the_write_policy(store: RelayStore) -> None:
    policy = FailsOn(_waiting_cid())
    relay = create_relay(store)
    async with relay.running():
        _use(relay, policy, retry_first_s=30.0)  # no retry during the test
        await _kept(relay, policy)
        async with asgi_client(relay.app, base_url="http://r") as client:
            status = await get_json(client, f"/operations/{policy.cid}/status")
            pending = await get_json(client, "/operations/pending")
    assert status["status"] == "waiting"
    assert status["waitingFor"] == waits_for_policy(policy.cid)
    assert status["dependency"] == {"kind": "policy", "id": policy.cid}
    assert "waiting for the write policy" in status["detail"]
    assert pending["byDependency"]["policy"]["count"] == 1
    assert pending["byDependency"]["op"]["count"] == 0


async def test_a_policy_that_always_fails_is_asked_a_bounded_number_of_times(
    store: RelayStore,
) -> None:
    policy = FailsOn(_waiting_cid())
    relay = create_relay(store)
    async with relay.running():
        _use(relay, policy, **FAST)
        await _kept(relay, policy)
        started = time.monotonic()
        await asyncio.sleep(1.2)
        window = [t for t in policy.calls if t >= started]
        # delays 0.05, 0.1, 0.2, 0.2, ...: about 7 attempts in 1.2 s; a retry
        # without backoff would be hundreds
        assert 3 <= len(window) <= 9, len(window)
        gaps = [b - a for a, b in itertools.pairwise(window)]
        assert all(gap >= 0.04 for gap in gaps), gaps
        assert await relay.store.get_operation(policy.cid) is None
        assert await relay.store.count_unsequenced() == 1  # still kept


async def test_stopping_the_relay_stops_the_retry(store: RelayStore) -> None:
    policy = FailsOn(_waiting_cid())
    relay = create_relay(store)
    async with relay.running():
        _use(relay, policy, **FAST)
        await _kept(relay, policy)
        assert relay.policy_retry.running
    assert not relay.policy_retry.running
    names = {task.get_name() for task in asyncio.all_tasks()}
    assert "dfos-relay policy retry" not in names
    calls = len(policy.calls)
    await asyncio.sleep(0.3)
    assert len(policy.calls) == calls  # nothing asks the policy any more


async def test_a_kept_copy_takes_the_place_of_a_rejected_op(store: RelayStore) -> None:
    waiting_cid, (genesis, update1, update2) = identity_update_with_a_gap(seed=72)
    forged = forged_signature(update2)
    policy = FailsOn(waiting_cid)
    relay = create_relay(store)
    async with relay.running():
        # neither signature can be checked yet: the forgery is buffered
        # first, the genuine token waits beside it as a copy
        assert (await relay.ingest([genesis, forged]))[1].reason is RejectReason.MISSING_PREVIOUS
        assert (await relay.ingest([update2]))[0].reason is RejectReason.MISSING_PREVIOUS
        _use(relay, policy, retry_first_s=0.3, retry_max_s=0.3)
        # update 1 wakes the forgery (rejected), then the genuine copy: the
        # policy fails on it, and it stays, now as the CID's op
        assert [r.status for r in await relay.ingest([update1])] == [Status.NEW]
        assert len(policy.calls) == 1
        found = await relay.store.find_buffered([waiting_cid])
        assert found[waiting_cid].jws_token == update2
        assert found[waiting_cid].waits_for == waits_for_policy(waiting_cid)
        policy.recovered = True
        await _until(lambda: relay.store.get_operation(waiting_cid))
        stored = await relay.store.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2
        assert await relay.store.count_unsequenced() == 0
