"""A request cancelled while the write policy is asked about its ops (the
relay stopping, a caller's own timeout) cancels the calls it started: an
async policy's call does not run on, unowned, after its request is gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from relay import Relay, create_relay
from relay.ingest.policy import VerifiedOp, WritePolicy
from relay.rules.outcomes import Status
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS


@pytest.fixture
async def relay(store: RelayStore) -> AsyncIterator[Relay]:
    r = create_relay(store)
    async with r.running():
        yield r


async def test_a_cancelled_ingest_cancels_its_early_policy_calls(relay: Relay) -> None:
    b = WorkloadBuilder(seed=43, start_ms=PAST_MS)
    alice = b.identity()
    [genesis] = await relay.ingest(list(b.tokens))
    assert genesis.status is Status.NEW
    asked, ended = asyncio.Event(), asyncio.Event()
    cancelled: list[str] = []

    async def hangs(op: VerifiedOp, signer: str) -> None:
        asked.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(op.cid)
            raise
        finally:
            ended.set()

    relay.gate.policy = replace(WritePolicy(hangs, "test"), timeout_s=10.0)  # type: ignore[arg-type]
    b.beacon(alice)
    request = asyncio.ensure_future(relay.ingest([b.tokens[-1]]))
    await asyncio.wait_for(asked.wait(), 5)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    await asyncio.wait_for(ended.wait(), 2)  # before: it ran on for its 30 s
    assert len(cancelled) == 1
