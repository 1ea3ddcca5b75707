"""Ops kept through a write-policy error are the store's, not the process's:
every relay sharing a durable store (hypercorn workers on one SQLite file or
Postgres schema) retries them, whichever process kept them, so an op kept
by a worker that has gone (stopped, crashed, scaled down) is sequenced by
another without being sent again. A relay restarted on the store does so
too. Two workers retrying one op is harmless: sequencing sessions are
serialized across processes, and the later finds the op sequenced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from relay import Relay, create_relay
from relay.ingest.policy import VerifiedOp, WritePolicy
from relay.rules.outcomes import RejectReason, Status
from stores.base import RelayStore, waits_for_policy
from tests.admin.test_a_kept_op_is_retried_by_the_relay import FailsOn, _until
from tests.stores.conftest import reopen
from tests.support.backends import make_store
from tests.support.waiting_ops import chain_with_a_gap

FAST = {"retry_first_s": 0.05, "retry_max_s": 0.2}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RelayStore]:
    """A durable store, for relays that share it."""
    async with make_store(request.param, tmp_path) as store:
        yield store


def _accepts(op: VerifiedOp, signer: str) -> None:
    return None


def _use(relay: Relay, policy: object, **retry: float) -> None:
    relay.gate.policy = replace(WritePolicy(policy, "test"), timeout_s=0.5, **retry)  # type: ignore[arg-type]


async def _keep(relay: Relay, seed: int) -> str:
    """Through ``relay``, whose policy fails on it: an op waits for its
    parent, the parent arrives, and the op is kept. Returns its CID."""
    _, cid, (identity, genesis, update1, update2) = chain_with_a_gap(seed=seed)
    first = await relay.ingest([identity, genesis, update2])
    assert first[2].reason is RejectReason.MISSING_PREVIOUS  # answered: waiting
    assert [r.status for r in await relay.ingest([update1])] == [Status.NEW]
    found = await relay.store.find_buffered([cid])
    assert found[cid].waits_for == waits_for_policy(cid)
    return cid


async def test_an_op_a_stopped_worker_kept_is_sequenced_by_another(shared: RelayStore) -> None:
    cid = chain_with_a_gap(seed=91)[1]
    keeper, other = create_relay(shared), create_relay(reopen(shared))
    async with other.running():
        _use(other, _accepts, **FAST)
        async with keeper.running():
            _use(keeper, FailsOn(cid), retry_first_s=30.0, retry_max_s=30.0)
            await _keep(keeper, seed=91)
        # the keeper is gone; nothing is sent again
        await _until(lambda: other.store.get_operation(cid))
        assert await other.store.count_unsequenced() == 0


async def test_an_op_kept_before_a_restart_is_sequenced_after_it(shared: RelayStore) -> None:
    cid = chain_with_a_gap(seed=92)[1]
    before = create_relay(shared)
    async with before.running():
        _use(before, FailsOn(cid), retry_first_s=30.0)
        await _keep(before, seed=92)
    after = create_relay(reopen(shared))
    async with after.running():
        _use(after, _accepts, **FAST)
        await _until(lambda: after.store.get_operation(cid))
        assert await after.store.count_unsequenced() == 0


async def test_two_workers_retrying_one_op_sequence_it_once(shared: RelayStore) -> None:
    cid = chain_with_a_gap(seed=93)[1]
    policy = FailsOn(cid)  # both workers' policy: fails until it recovers
    one, two = create_relay(shared), create_relay(reopen(shared))
    async with one.running(), two.running():
        _use(one, policy, **FAST)
        _use(two, policy, **FAST)
        await _keep(one, seed=93)
        await _until(lambda: _both_retried(one, two))
        length = await one.store.log_length()
        policy.recovered = True
        await _until(lambda: one.store.get_operation(cid))
        since = (one.policy_retry.attempts, two.policy_retry.attempts)
        await _until(lambda: _both_retried(one, two, since))  # and again after
        assert await one.store.log_length() == length + 1  # once, by one of them
        assert await two.store.count_unsequenced() == 0
        assert one.policy_retry.running and two.policy_retry.running  # neither failed


async def _both_retried(one: Relay, two: Relay, since: tuple[int, int] = (1, 1)) -> bool:
    return one.policy_retry.attempts > since[0] and two.policy_retry.attempts > since[1]
