"""``Ingestor.quiet``: False from a batch's commit until its listeners have
been told of it (gossip registers the ops then), True again after, also
when a listener fails. The out-links' heads follow the store's log only
while quiet, so an op of this process is never passed before it is queued
(``relay.peering.watermark.OutLinks.follow_head``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from relay import Relay
from relay.rules.outcomes import SequencedOp
from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS


async def test_quiet_only_once_the_listeners_were_told(relay: Relay) -> None:
    told: list[bool] = []

    async def listener(ops: Sequence[SequencedOp], source: str | None) -> None:
        told.append(relay.ingest_quiet())

    relay.ingestor.add_listener(listener)
    assert relay.ingest_quiet()
    b = WorkloadBuilder(seed=3, start_ms=PAST_MS)
    b.identity()
    await relay.ingest(b.tokens)
    assert told == [False] and relay.ingest_quiet()
    await relay.ingest(b.tokens)  # duplicates: nothing committed, nothing told
    assert told == [False] and relay.ingest_quiet()


async def test_quiet_again_when_a_listener_fails(relay: Relay) -> None:
    def failing(ops: Sequence[SequencedOp], source: str | None) -> None:
        raise RuntimeError("listener down")

    relay.ingestor.add_listener(failing)
    b = WorkloadBuilder(seed=4, start_ms=PAST_MS)
    b.identity()
    with pytest.raises(RuntimeError):
        await relay.ingest(b.tokens)
    assert relay.ingest_quiet()
