"""PROTOCOL.md "Future timestamp bound": an op dated beyond its kind's guard
(24 h; beacons 5 min) ahead of the relay's clock MUST be rejected. One that
also misses its parent or signer is rejected at once (``future-timestamp``,
the verifier's text), not answered waiting and parked until its dependency
arrives only to be rejected then. An op parked within the bound is judged
by the chain rules when woken, as before; and such ops left in the buffer
by an older version are rejected cleanly by the restart's drain."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay import create_relay
from relay.engine import Relay
from relay.protocol import decode_jws
from relay.rules.outcomes import RejectReason, Status
from relay.testing.workload import WorkloadBuilder
from stores.base import CommitBatch, PendingOp, RelayStore, waits_for_op
from tests.stores.conftest import reopen
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, get_json, post
from tests.support.served import Clock

HOUR_MS = 3600 * 1000
MINUTE_MS = 60 * 1000
NOW_MS = PAST_MS + 1000 * HOUR_MS
TOO_FAR = "createdAt is more than 24h in the future"


@pytest.fixture
async def clocked(store: RelayStore) -> AsyncIterator[tuple[Relay, Clock]]:
    clock = Clock(NOW_MS)
    relay = create_relay(store, clock=clock)
    async with relay.running():
        yield relay, clock


def _content_with_a_gap(seed: int, ahead_ms: int) -> tuple[list[str], str]:
    """Tokens identity, genesis, update 1, update 2 (dated ``ahead_ms`` past
    the relay's clock); update 2's CID."""
    b = WorkloadBuilder(seed=seed, start_ms=NOW_MS - HOUR_MS)
    author = b.identity()
    chain = b.content_create(author)
    b.content_update(chain)
    late = b.content_update(chain, created_ms=NOW_MS + ahead_ms)
    return list(b.tokens), late


async def test_a_future_content_op_missing_its_parent_is_rejected_over_http(
    clocked: tuple[Relay, Clock],
) -> None:
    relay, _ = clocked
    (identity, genesis, _, late), cid = _content_with_a_gap(61, 24 * HOUR_MS + 1000)
    async with asgi_client(relay.app, base_url="http://r") as client:
        results = await post(client, [identity, genesis, late])
        assert results[2]["status"] == "rejected"
        assert results[2]["error"] == TOO_FAR
        status = await get_json(client, f"/operations/{cid}/status")
    assert (status["status"], status["reason"]) == ("rejected", "future-timestamp")
    assert await relay.store.count_unsequenced() == 0


async def test_a_future_identity_update_missing_its_parent_is_rejected(
    clocked: tuple[Relay, Clock],
) -> None:
    relay, _ = clocked
    b = WorkloadBuilder(seed=62, start_ms=NOW_MS - HOUR_MS)
    author = b.identity()
    b.rotate(author)
    b._now = NOW_MS + 25 * HOUR_MS - b.step_ms  # the next op's createdAt
    b.rotate(author)
    genesis, _, late = b.tokens
    results = await relay.ingest([genesis, late])
    assert results[1].status is Status.REJECTED
    assert (results[1].reason, results[1].error) == (RejectReason.FUTURE_TIMESTAMP, TOO_FAR)
    assert await relay.store.count_unsequenced() == 0


@pytest.mark.parametrize(
    ("ahead_ms", "kind"), [(10 * MINUTE_MS, "beacon"), (25 * HOUR_MS, "artifact")]
)
async def test_a_future_standalone_op_of_an_unknown_signer_is_rejected(
    clocked: tuple[Relay, Clock], ahead_ms: int, kind: str
) -> None:
    relay, _ = clocked
    b = WorkloadBuilder(seed=63, start_ms=NOW_MS - HOUR_MS)
    author = b.identity()  # never sent: the signer is missing
    b._now = NOW_MS + ahead_ms - b.step_ms
    b.beacon(author) if kind == "beacon" else b.artifact(author)
    [result] = await relay.ingest([b.tokens[1]])
    assert result.reason is RejectReason.FUTURE_TIMESTAMP, result
    window = "5min" if kind == "beacon" else "24h"
    assert result.error == f"createdAt is more than {window} in the future"
    assert await relay.store.count_unsequenced() == 0


async def test_an_op_parked_within_the_bound_is_judged_when_woken(
    clocked: tuple[Relay, Clock],
) -> None:
    relay, clock = clocked
    (identity, genesis, update1, early), cid = _content_with_a_gap(64, 23 * HOUR_MS)
    results = await relay.ingest([identity, genesis, early])
    assert results[2].reason is RejectReason.MISSING_PREVIOUS  # waiting
    clock.now_ms += HOUR_MS
    assert [r.status for r in await relay.ingest([update1])] == [Status.NEW]
    assert await relay.store.get_operation(cid) is not None


async def test_a_parked_op_the_clock_fell_behind_is_rejected_by_the_rules(
    clocked: tuple[Relay, Clock],
) -> None:
    relay, clock = clocked
    (identity, genesis, update1, early), cid = _content_with_a_gap(65, 23 * HOUR_MS)
    await relay.ingest([identity, genesis, early])
    clock.now_ms -= 2 * HOUR_MS  # the clock stepped back: now beyond the bound
    await relay.ingest([update1])
    assert await relay.store.get_operation(cid) is None
    [status] = await relay.status.explain_many([cid])
    assert status.note is not None and status.note.reason == "future-timestamp"
    assert await relay.store.count_unsequenced() == 0


async def test_future_ops_an_older_version_buffered_are_rejected_at_restart(
    store: RelayStore,
) -> None:
    (identity, genesis, _, late), cid = _content_with_a_gap(66, 25 * HOUR_MS)
    parent = decode_jws(late).payload["previousOperationCID"]
    await store.open()
    try:  # parked as an older version did: waiting for its parent
        async with store.sequencing() as session:
            waiting = {cid: PendingOp(cid, late, waits_for_op(parent), NOW_MS)}
            await session.commit(CommitBatch(waiting=waiting))
    finally:
        await store.close()
    relay = create_relay(reopen(store), clock=Clock(NOW_MS))
    async with relay.running():
        assert await relay.store.count_unsequenced() == 0
        [status] = await relay.status.explain_many([cid])
        assert status.note is not None
        assert (status.note.reason, status.note.detail) == ("future-timestamp", TOO_FAR)
        # the chain it claims to extend still takes ops
        assert [r.status for r in await relay.ingest([identity, genesis])] == [Status.NEW] * 2
