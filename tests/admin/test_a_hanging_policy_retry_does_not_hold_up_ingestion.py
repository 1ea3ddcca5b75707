"""The relay's retry of a kept op asks the write policy outside the
sequencing session: while the policy hangs on that op (each call running
past its timeout), the retries hold up no other ingestion. Before, each
retry waited on the policy inside the session, up to the policy's timeout,
and every post queued behind it."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import replace

from relay import create_relay
from relay.ingest.policy import VerifiedOp, WritePolicy
from relay.rules.outcomes import Status
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.admin.test_a_kept_op_is_retried_by_the_relay import _until
from tests.support.relay_api import PAST_MS
from tests.support.waiting_ops import chain_with_a_gap

TIMEOUT_S = 1.0  # the policy's timeout: what a retry held the sequencer for


class HangsOn:
    """A policy that hangs (longer than its timeout) on ``cid`` and accepts
    every other op at once."""

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.hung = 0

    def __call__(self, op: VerifiedOp, signer: str) -> None:
        if op.cid == self.cid:
            self.hung += 1
            time.sleep(TIMEOUT_S * 1.5)


async def test_posts_are_not_held_up_by_retries_of_a_hanging_policy(store: RelayStore) -> None:
    _, cid, (identity, genesis, update1, update2) = chain_with_a_gap(seed=97)
    policy = HangsOn(cid)
    b = WorkloadBuilder(seed=98, start_ms=PAST_MS)
    others = [b.identity() for _ in range(40)]  # unrelated ops, one post each
    assert len(others) == len(b.tokens)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity, genesis, update2])  # waits for its parent
        relay.gate.policy = replace(
            WritePolicy(policy, "hangs_on"), timeout_s=TIMEOUT_S, retry_first_s=0.05,
            retry_max_s=0.05,
        )  # fmt: skip
        await relay.ingest([update1])  # the policy hangs on update 2: kept
        await _until(lambda: _hung_at_least(policy, 2), within_s=10)  # retries run
        latencies: list[float] = []
        for token in b.tokens:
            started = time.monotonic()
            [result] = await relay.ingest([token])
            latencies.append(time.monotonic() - started)
            assert result.status is Status.NEW
            await asyncio.sleep(0.05)
        assert policy.hung >= 3  # retries ran throughout
        assert await relay.store.get_operation(cid) is None  # and kept it
        # each post waits for its own session only; a retry holding the
        # sequencer on the policy made some wait up to the policy's timeout
        assert max(latencies) < TIMEOUT_S / 2, (max(latencies), statistics.median(latencies))


async def _hung_at_least(policy: HangsOn, n: int) -> bool:
    return policy.hung >= n
