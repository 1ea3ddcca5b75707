"""The write policy is asked about a request's verified ops before its
sequencing session, with no lock held: concurrent requests wait on the
policy together, not one after another behind the sequencing lock. The
session uses an answer only for the op it was asked about, and judges
bans (as stored under its lock), exempt signers and the lists as ever."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from relay import Relay, create_relay
from relay.ingest.policy import Held, Refused, VerifiedOp, WriteGate, WritePolicy
from relay.rules.outcomes import Rejected, RejectReason, Status
from relay.testing.workload import Actor, WorkloadBuilder
from stores.base import OperationRecord, RelayStore
from stores.moderation import BanRecord
from tests.support.relay_api import PAST_MS

LATENCY_S = 0.3  # the policy's time per call


@pytest.fixture
async def relay(store: RelayStore) -> AsyncIterator[Relay]:
    r = create_relay(store)
    async with r.running():
        yield r


async def identities(relay: Relay, n: int) -> tuple[WorkloadBuilder, list[Actor]]:
    b = WorkloadBuilder(seed=41, start_ms=PAST_MS)
    actors = [b.identity() for _ in range(n)]
    results = await relay.ingest(list(b.tokens))
    assert {r.status for r in results} == {Status.NEW}
    return b, actors


def beacon(b: WorkloadBuilder, actor: Actor) -> str:
    b.beacon(actor)
    return b.tokens[-1]


def use(relay: Relay, function: object, timeout_s: float = 5.0) -> None:
    relay.gate.policy = replace(WritePolicy(function, "test"), timeout_s=timeout_s)  # type: ignore[arg-type]


async def test_concurrent_requests_wait_on_a_slow_policy_together(relay: Relay) -> None:
    """Six posts at once, a policy of 0.3 s per call: about one call's
    time in all, not six (each held the sequencing lock for its call)."""
    b, actors = await identities(relay, 6)
    calls: list[str] = []

    async def slow(op: VerifiedOp, signer: str) -> None:
        calls.append(op.cid)
        await asyncio.sleep(LATENCY_S)

    use(relay, slow)
    tokens = [beacon(b, actor) for actor in actors]
    started = time.monotonic()
    answers = await asyncio.gather(*(relay.ingest([token]) for token in tokens))
    elapsed = time.monotonic() - started
    assert [r.status for [r] in answers] == [Status.NEW] * 6
    assert len(calls) == 6  # one call per op, none asked again in session
    assert elapsed < 3 * LATENCY_S, elapsed  # one after another: 6 * 0.3 s


async def test_a_blocking_policy_answers_many_requests_at_once(relay: Relay) -> None:
    """A synchronous policy (a blocking call to the operator's service) has
    threads enough for the requests waiting together: twelve posts at once,
    0.3 s per call, take about one call's time (on 4 threads, three)."""
    b, actors = await identities(relay, 12)
    calls: list[str] = []

    def blocking(op: VerifiedOp, signer: str) -> None:
        calls.append(op.cid)
        time.sleep(LATENCY_S)

    use(relay, blocking)
    tokens = [beacon(b, actor) for actor in actors]
    started = time.monotonic()
    answers = await asyncio.gather(*(relay.ingest([token]) for token in tokens))
    elapsed = time.monotonic() - started
    assert [r.status for [r] in answers] == [Status.NEW] * 12
    assert len(calls) == 12
    assert elapsed < 2 * LATENCY_S, elapsed  # 4 threads: 3 * 0.3 s


async def test_a_ban_stored_after_the_policy_answered_still_refuses(relay: Relay) -> None:
    """The policy accepts, and a ban of the signer is stored (by another
    worker: this one's cache does not know it) before the session: the
    session reads it under its lock and refuses the op."""
    b, [alice] = await identities(relay, 1)

    async def accept_then_ban(op: VerifiedOp, signer: str) -> None:
        await relay.store.put_ban(BanRecord(signer, "spam", 0, "did:example:operator"))

    use(relay, accept_then_ban)
    [result] = await relay.ingest([beacon(b, alice)])
    assert result.status is Status.REJECTED and result.reason is RejectReason.BANNED


async def test_a_refusal_answers_policy_denied_with_its_reason(
    relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    b, [alice, bob] = await identities(relay, 2)
    in_session: list[VerifiedOp] = []
    decide = relay.gate.decide

    async def spy(held: Any) -> None:  # the session's own asking
        in_session.extend(held)
        await decide(held)

    monkeypatch.setattr(relay.gate, "decide", spy)

    async def refuse_alice(op: VerifiedOp, signer: str) -> str | None:
        return "alice may not post here" if signer == alice.did else None

    use(relay, refuse_alice)
    refused, accepted = await asyncio.gather(
        relay.ingest([beacon(b, alice)]), relay.ingest([beacon(b, bob)])
    )
    assert refused[0].reason is RejectReason.POLICY_DENIED
    assert refused[0].error == "policy: alice may not post here"
    assert accepted[0].status is Status.NEW
    assert in_session == []  # both answered before their session


async def test_two_requests_carrying_one_op_at_once(relay: Relay) -> None:
    """Each request's session judges by its own answer: one sequences it,
    the other finds it a duplicate, whichever comes first."""
    b, [alice] = await identities(relay, 1)
    calls: list[str] = []

    async def slow(op: VerifiedOp, signer: str) -> None:
        calls.append(op.cid)
        await asyncio.sleep(LATENCY_S)

    use(relay, slow)
    token = beacon(b, alice)
    answers = await asyncio.gather(relay.ingest([token]), relay.ingest([token]))
    assert sorted(r.status.value for [r] in answers) == ["duplicate", "new"]
    assert set(calls) == {answers[0][0].cid}  # asked by each request (twice), or once


async def test_a_content_chain_is_asked_about_at_once(relay: Relay) -> None:
    """A chain's ops are each judged in a round of their own once their
    parent is staged; asked before the session, all at once. An update
    whose parent the store holds is asked early too."""
    b, [alice] = await identities(relay, 1)
    in_session: list[bool] = []

    async def slow(op: VerifiedOp, signer: str) -> None:
        in_session.append(relay.ingestor._lock.locked())
        await asyncio.sleep(LATENCY_S)

    use(relay, slow, timeout_s=2 * LATENCY_S)
    chain = b.content_create(alice)
    for _ in range(3):
        b.content_update(chain)
    started = time.monotonic()
    results = await relay.ingest(b.tokens[-4:])
    assert [r.status for r in results] == [Status.NEW] * 4
    assert time.monotonic() - started < 3 * LATENCY_S  # a round each: 4 * 0.3 s
    b.content_update(chain)
    assert [r.status for r in await relay.ingest(b.tokens[-1:])] == [Status.NEW]
    assert in_session == [False] * 5


def _record(cid: str, chain_id: str, token: str = "t") -> OperationRecord:
    return OperationRecord(cid, token, "beacon", chain_id, chain_id, None, 1)


def test_an_early_answer_serves_only_the_op_it_was_asked_about() -> None:
    """Another token of the CID, or the same token shown with another
    chain or signer, is held for a decision of its own; and the answers
    are forgotten with the session."""
    gate = WriteGate(WritePolicy(lambda op, signer: None, "test"))
    asked = _record("cid1", "did:a")
    refusal = Rejected(RejectReason.POLICY_DENIED, "policy: no")
    gate.preset_early({("cid1", "t"): (asked, refusal)})
    with pytest.raises(Refused):  # the early answer, for the op it was asked about
        gate.screen(asked)
    for other in (_record("cid1", "did:b"), _record("cid1", "did:a", token="u")):
        with pytest.raises(Held):
            gate.screen(other)
    gate.forget()
    with pytest.raises(Held):
        gate.screen(asked)


async def test_ops_that_would_wait_are_not_asked_about(relay: Relay) -> None:
    """An op whose parent, or countersigned target, is neither in its
    request nor stored waits for it: the policy is not asked about it then,
    but once it is woken and verified."""
    b, [alice, bob] = await identities(relay, 2)
    calls: list[str] = []

    async def recording(op: VerifiedOp, signer: str) -> None:
        calls.append(op.kind)

    use(relay, recording)
    artifact_cid = b.artifact(bob)
    artifact = b.tokens[-1]
    b.countersign(alice, artifact_cid)
    countersign = b.tokens[-1]
    chain = b.content_create(alice)
    genesis = b.tokens[-1]
    b.content_update(chain)
    update = b.tokens[-1]
    results = await relay.ingest([countersign, update])
    assert [r.reason for r in results] == [
        RejectReason.MISSING_TARGET, RejectReason.MISSING_PREVIOUS
    ]  # fmt: skip
    assert calls == []
    results = await relay.ingest([artifact, genesis])
    assert [r.status for r in results] == [Status.NEW] * 2
    assert sorted(calls) == ["artifact", "content-op", "content-op", "countersign"]
