"""The write policy: allow/deny lists and an operator function, called once
per verified op before commit with the op and its signer. It accepts, or
refuses with a reason that reaches the client's result line; a raising,
ill-typed or slow function refuses with ``policy-error`` within the timeout
and never stalls the sequencer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from relay.config import RelayConfig
from relay.ingest.policy import (
    EARLY_POLICY_THREADS,
    MAX_POLICY_TEXT,
    MAX_STUCK_CALLS,
    POLICY_THREADS,
    SESSION_BUDGET_ROUNDS,
    PolicyFunction,
    WritePolicy,
)
from stores.base import RelayStore

from . import policies
from .conftest import TRANSPORTS, World, open_world


def use(world: World, function: PolicyFunction | None = None, **lists: Any) -> None:
    """Swap the relay's write policy (the world's identities are in already)."""
    sets = {name: frozenset(values) for name, values in lists.items()}
    timeout = sets.pop("timeout_s", None)
    policy = WritePolicy(function, getattr(function, "__name__", ""), **sets)
    world.relay.gate.policy = replace(policy, timeout_s=0.3) if timeout else policy


def token_of(world: World, make: Any) -> str:
    make()
    return world.builder.tokens[-1]


async def line(world: World, token: str) -> dict[str, Any]:
    return (await world.post([token]))[0]


async def test_deny_and_allow_lists(world: World) -> None:
    b, alice, bob = world.builder, world.alice, world.bob
    use(world, deny_dids={alice.did}, deny_kinds={"artifact"})
    refused = await line(world, world.beacon(alice))
    assert refused["reason"] == "policy-denied" and "deny list" in refused["error"]
    assert (await line(world, world.beacon(bob)))["status"] == "new"
    refused = await line(world, token_of(world, lambda: b.artifact(bob)))
    assert refused["reason"] == "policy-denied" and "artifact" in refused["error"]
    use(world, allow_dids={bob.did}, allow_kinds={"beacon"})
    assert (await line(world, world.beacon(world.outsider)))["reason"] == "policy-denied"
    refused = await line(world, token_of(world, lambda: b.content_create(bob)))
    assert refused["reason"] == "policy-denied" and "not allowed" in refused["error"]
    assert (await line(world, world.beacon(bob)))["status"] == "new"
    # the relay's operators are exempt: their identity must stay usable
    assert (await line(world, world.beacon(world.operator)))["status"] == "new"


@pytest.fixture(params=TRANSPORTS)
async def beaconless(
    request: pytest.FixtureRequest, store: RelayStore, audit_lines: list[dict[str, Any]]
) -> AsyncIterator[World]:
    policy = WritePolicy(policies.refuse_beacons, "tests.admin.policies:refuse_beacons")
    config = RelayConfig(write_policy=policy)
    async with open_world(store, request.param, audit_lines, config=config) as w:
        yield w


async def test_a_policy_refuses_with_a_reason_on_the_result_line(beaconless: World) -> None:
    w = beaconless
    refused = await line(w, w.beacon(w.alice))
    assert refused == {
        "cid": refused["cid"], "status": "rejected", "kind": "beacon",
        "error": "policy: no beacons here", "reason": "policy-denied",
    }  # fmt: skip
    assert (await line(w, token_of(w, lambda: w.builder.content_create(w.alice))))["status"] == (
        "new"
    )
    use(w, policies.refuse_all)
    refused = await line(w, token_of(w, lambda: w.builder.artifact(w.bob)))
    assert refused["reason"] == "policy-denied" and "write policy" in refused["error"]


async def test_an_async_policy(world: World) -> None:
    use(world, policies.refuse_artifacts)
    refused = await line(world, token_of(world, lambda: world.builder.artifact(world.bob)))
    assert refused["error"] == "policy: no artifacts"
    assert (await line(world, world.beacon(world.bob)))["status"] == "new"


@pytest.mark.parametrize(
    ("function", "text"),
    [(policies.explode, "RuntimeError: boom"), (policies.ill_typed, "returned int")],
    ids=["raises", "ill-typed"],
)
async def test_a_failing_policy_refuses_with_policy_error(
    world: World, function: PolicyFunction, text: str
) -> None:
    use(world, function)
    refused = await line(world, world.beacon(world.alice))
    assert refused["reason"] == "policy-error" and refused["error"].startswith("policy error")
    assert text in refused["error"]


async def test_a_slow_policy_is_bounded_and_never_stalls_the_sequencer(world: World) -> None:
    use(world, policies.slow_for_some, timeout_s={0.3})
    policies.SLOW.add(world.alice.did)
    try:
        started = time.monotonic()
        slow, fast = await asyncio.gather(
            line(world, world.beacon(world.alice)), line(world, world.beacon(world.bob))
        )
        assert time.monotonic() - started < 3
        assert slow["reason"] == "policy-error" and "within 0.3s" in slow["error"]
        assert fast["status"] == "new"  # its own session: judged at once after the slow one
        # the hung call is abandoned: later ops are judged at once
        started = time.monotonic()
        assert (await line(world, world.beacon(world.bob)))["status"] == "new"
        assert time.monotonic() - started < 2
    finally:
        policies.SLOW.clear()


@pytest.mark.parametrize(
    ("function", "text"),
    [
        (policies.exits, "SystemExit: 1"),
        (policies.interrupts, "KeyboardInterrupt"),
        (policies.cancelled, "CancelledError"),
        (policies.exits_async, "SystemExit: 1"),
    ],
    ids=["sys-exit", "keyboard-interrupt", "cancelled-error", "async-sys-exit"],
)
async def test_whatever_a_policy_raises_refuses_its_op_only(
    world: World, function: PolicyFunction, text: str
) -> None:
    """Operator code cannot end the relay or fail a request: the op it
    raised on is refused, the batch around it proceeds."""
    use(world, function)
    b = world.builder
    first = token_of(world, lambda: b.artifact(world.bob))
    beacon = world.beacon(world.alice)
    second = token_of(world, lambda: b.artifact(world.alice))
    results = await world.post([first, beacon, second])
    assert [r["status"] for r in results] == ["new", "rejected", "new"]
    assert results[1]["reason"] == "policy-error" and text in results[1]["error"]
    assert (await line(world, world.beacon(world.bob)))["reason"] == "policy-error"  # still up


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        (policies.raises_unprintable, "policy-error"),
        (policies.sullen_reason, "policy-denied"),
        (policies.untextual_reason, "policy-denied"),
        (policies.untextual_error, "policy-error"),
        (policies.endless_reason, "policy-denied"),
    ],
    ids=["unprintable-error", "str-subclass", "surrogate-nul", "in-error", "huge"],
)
async def test_a_policy_answer_that_cannot_be_carried_refuses_its_op_only(
    world: World, function: PolicyFunction, reason: str
) -> None:
    """Whatever the policy's answer holds, the batch around its op proceeds
    and the op's line carries bounded UTF-8 text (no NUL for Postgres)."""
    use(world, function)
    b = world.builder
    first = token_of(world, lambda: b.artifact(world.bob))
    beacon = world.beacon(world.alice)
    results = await world.post([first, beacon])
    assert [r["status"] for r in results] == ["new", "rejected"]
    error = results[1]["error"]
    assert results[1]["reason"] == reason and error.startswith("policy")
    assert len(error) <= MAX_POLICY_TEXT + 20 and "\x00" not in error
    error.encode("utf-8")  # no lone surrogate
    status = await world.client.get(f"/operations/{results[1]['cid']}/status")
    assert status.status_code == 200 and status.json()["reason"] == reason


async def test_a_policy_changing_the_payload_it_is_shown_changes_nothing(world: World) -> None:
    """The op is verified and committed as signed, whatever the policy does
    to its copy: no key it planted, no refusal of a valid op (for good)."""
    use(world, policies.meddles)
    b = world.builder
    start = len(b.tokens)
    newcomer = b.identity()
    b.rotate(newcomer)
    chain = b.content_create(newcomer)
    b.content_update(chain)
    results = await world.post(b.tokens[start:])
    assert [r["status"] for r in results] == ["new"] * 4, results
    state = (await world.relay.store.get_chain(newcomer.did)).state  # type: ignore[union-attr]
    planted = [key for role in state.values() if isinstance(role, list) for key in role
               if key[0] == "planted"]  # fmt: skip
    assert planted == []


async def test_calls_that_hang_do_not_take_the_threads_of_later_ones(world: World) -> None:
    use(world, policies.hang_for_some, timeout_s={0.3})
    policies.SLOW.add(world.alice.did)
    policies.RELEASE.clear()
    try:
        for _ in range(POLICY_THREADS + 2):  # more hung calls than a pool has threads
            hung = await line(world, world.beacon(world.alice))
            assert hung["reason"] == "policy-error" and "within 0.3s" in hung["error"]
        started = time.monotonic()
        assert (await line(world, world.beacon(world.bob)))["status"] == "new"
        assert time.monotonic() - started < 0.3  # judged at once, not queued behind them
    finally:
        policies.SLOW.clear()
        policies.RELEASE.set()


async def test_async_calls_that_ignore_their_cancellation_count_as_hung(world: World) -> None:
    """Such a call runs on for good: past ``MAX_STUCK_CALLS`` of them, ops are
    refused without a call (as for hung threads) until they end."""
    use(world, policies.ignores_cancellation, timeout_s={0.3})
    policies.STUBBORN.update(started=0, stop=False)
    try:
        results = await world.post([world.beacon(world.bob) for _ in range(MAX_STUCK_CALLS)])
        assert {r["reason"] for r in results} == {"policy-error"}
        started = time.monotonic()
        results = await world.post([world.beacon(world.bob) for _ in range(8)])
        assert time.monotonic() - started < 0.3  # no call, no wait
        assert all("still hang" in r["error"] for r in results), results
        assert policies.STUBBORN["started"] == MAX_STUCK_CALLS
    finally:
        policies.STUBBORN["stop"] = True
    await asyncio.sleep(0.2)  # they end
    await world.post([world.beacon(world.bob)])
    assert policies.STUBBORN["started"] == MAX_STUCK_CALLS + 1  # called again


async def test_a_chain_waits_on_the_policy_a_bounded_time_in_all(world: World) -> None:
    """Each op of a chain the policy did not answer before the session (more
    ops than its early threads, so some early calls are late) is judged only
    once its parent is staged, a round each; the session's wait is bounded
    all the same, and what the budget left undecided is refused
    (transiently: sent again, it passes)."""
    use(world, policies.paced, timeout_s={0.3})
    b, alice = world.builder, world.alice
    chain = b.content_create(alice)
    length = EARLY_POLICY_THREADS + 4
    for _ in range(length - 1):
        b.content_update(chain)
    tokens = b.tokens[-length:]
    started = time.monotonic()
    results = await world.post(tokens)
    waited = time.monotonic() - started
    budget = 0.3 * SESSION_BUDGET_ROUNDS
    assert waited < 0.3 + budget + 1.0, waited  # the early calls' wait, then the session's
    statuses = [r["status"] for r in results]
    assert statuses[0] == "new" and "rejected" in statuses
    refused = [r for r in results if r["status"] == "rejected"]
    assert any("within this session's 0.6s" in r["error"] for r in refused)
    assert all(r["reason"] in ("policy-error", "missing-previous") for r in refused)
    for _ in range(length):  # each request gets further; nothing was recorded as refused
        if all(r["status"] != "rejected" for r in await world.post(tokens)):
            break
    assert [r["status"] for r in await world.post(tokens)] == ["duplicate"] * length


async def test_called_once_per_verified_op_and_only_after_verification(world: World) -> None:
    use(world, policies.recording)
    policies.CALLS.clear()
    b, alice = world.builder, world.alice
    forged = world.beacon(alice)
    head, _, signature = forged.rpartition(".")
    forged = f"{head}.{'A' * len(signature)}"
    chain = b.content_create(alice)
    genesis = b.tokens[-1]
    update_cid = b.content_update(chain)
    update = b.tokens[-1]
    results = await world.post([forged, update])  # the update waits for its parent
    assert results[0]["status"] == "rejected" and results[0]["reason"] != "policy-error"
    assert results[1]["reason"] == "missing-previous"
    assert policies.CALLS == []
    assert [r["status"] for r in await world.post([genesis])] == ["new"]
    assert [
        (chain.genesis_cid, "content-op", alice.did),
        (update_cid, "content-op", alice.did),  # woken from the buffer, judged once
    ] == policies.CALLS
    assert [r["status"] for r in await world.post([genesis, update])] == ["duplicate"] * 2
    assert len(policies.CALLS) == 2
