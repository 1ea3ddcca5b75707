"""The relay does not retry a kept op for good: once it has waited for the
write policy ``WritePolicy.retry_give_up_s`` (default 24 h), the next retry
the policy fails on rejects it (``policy-error``, saying the relay gave up),
and it leaves the pending buffer; its status route says why. Like any
policy refusal it is not recorded: sent again, it passes once the policy
does. The wait counts from when the op began waiting for the policy, not
from when it first waited for a dependency."""

from __future__ import annotations

import asyncio

from relay import Relay, create_relay
from relay.ingest.pipeline import GAVE_UP
from relay.ingest.policy import WritePolicy
from relay.rules.outcomes import Status
from relay.settings import parse_settings
from stores.base import RelayStore, waits_for_policy
from tests.admin.test_a_kept_op_is_retried_by_the_relay import FailsOn, _until, _use
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import get_json
from tests.support.served import Clock
from tests.support.waiting_ops import chain_with_a_gap

HOUR_MS = 3600 * 1000
FAST = {"retry_first_s": 0.05, "retry_max_s": 0.1, "retry_give_up_s": 3600.0}


async def _calls_at_least(policy: FailsOn, n: int) -> bool:
    return len(policy.calls) >= n


async def test_a_kept_op_is_rejected_once_it_has_waited_too_long(store: RelayStore) -> None:
    _, cid, (identity, genesis, update1, update2) = chain_with_a_gap(seed=95)
    policy = FailsOn(cid)
    clock = Clock()
    relay = create_relay(store, clock=clock)
    async with relay.running():
        _use(relay, policy, **FAST)
        await relay.ingest([identity, genesis, update2])  # waits for its parent
        clock.advance(2 * HOUR_MS)  # longer than the give-up, but for its parent
        assert [r.status for r in await relay.ingest([update1])] == [Status.NEW]
        found = await relay.store.find_buffered([cid])
        assert found[cid].waits_for == waits_for_policy(cid)
        assert found[cid].since_ms == clock.now_ms  # waiting for the policy since now
        await _until(lambda: _calls_at_least(policy, 4))  # retried, not given up
        assert await relay.store.count_unsequenced() == 1
        clock.advance(HOUR_MS)  # now it has waited for the policy an hour
        await _until(lambda: _given_up(relay, cid))  # (its note is written after the commit)
        calls = len(policy.calls)
        async with asgi_client(relay.app, base_url="http://r") as client:
            status = await get_json(client, f"/operations/{cid}/status")
            pending = await get_json(client, "/operations/pending")
        assert status["status"] == "rejected"
        assert status["reason"] == "policy-error"
        assert status["detail"].startswith("policy error: RuntimeError: policy backend")
        assert status["detail"].endswith(GAVE_UP)
        assert pending["byDependency"]["policy"]["count"] == 0
        await asyncio.sleep(0.5)  # several retry periods
        assert len(policy.calls) == calls  # no longer retried
        # not recorded: sent again once the policy answers, it passes
        policy.recovered = True
        [again] = await relay.ingest([update2])
        assert again.status is Status.NEW


async def test_an_op_the_policy_answers_at_the_last_retry_is_sequenced(
    store: RelayStore,
) -> None:
    _, cid, (identity, genesis, update1, update2) = chain_with_a_gap(seed=96)
    policy = FailsOn(cid)
    clock = Clock()
    relay = create_relay(store, clock=clock)
    async with relay.running():
        _use(relay, policy, retry_first_s=30.0, retry_max_s=30.0, retry_give_up_s=3600.0)
        await relay.ingest([identity, genesis, update2])
        [accepted] = await relay.ingest([update1])
        assert accepted.status is Status.NEW
        clock.advance(2 * HOUR_MS)
        policy.recovered = True  # the retry past the give-up asks the policy once more
        assert await relay.ingestor.retry_kept() == 0
        assert await relay.store.get_operation(cid) is not None
        [status] = await relay.status.explain_many([cid])
        assert status.location is not None


def test_the_give_up_is_a_serve_setting() -> None:
    env = {"DFOS_RELAY_DENY_KINDS": "artifact", "DFOS_RELAY_WRITE_POLICY_GIVE_UP": "60"}
    policy = parse_settings(env).write_gate_policy()
    assert policy is not None and policy.retry_give_up_s == 60.0
    assert WritePolicy().retry_give_up_s == 24 * 3600  # the default


async def _given_up(relay: Relay, cid: str) -> bool:
    [status] = await relay.status.explain_many([cid])
    return status.note is not None and status.note.detail.endswith(GAVE_UP)
