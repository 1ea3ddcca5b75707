"""A purge is applied in steps, each one transaction that leaves the store
auditing clean; the first records the purge as under way, the last clears
it. A purge cut short between steps (a crash: a step in flight rolls back)
is finished by the relay's next start, from what remains: in the end the
same ops are gone, each recorded once, and nothing else is lost or changed."""

from __future__ import annotations

import asyncio

import pytest

from relay import create_relay
from relay.admin.purge_steps import purge_in_steps
from relay.audit import audit_store
from relay.config import RelayConfig
from relay.rules.outcomes import Status
from relay.testing.workload import DAY_MS, WorkloadBuilder
from stores.base import RelayStore
from stores.moderation import BanRecord
from tests.stores.conftest import reopen
from tests.support.whole_purge import plan_purge

STEP_OPS = 4
CUT_AFTER = 3  # steps
SETTLES_WITHIN = 3000  # polls of 10 ms: a bound on a hang, not a timing


class Crash(Exception):
    pass


def workload(start_ms: int) -> tuple[list[str], str]:
    b = WorkloadBuilder(seed=41, start_ms=start_ms)
    alice, bob = b.identity(), b.identity()
    for _ in range(3):
        chain = b.content_create(alice)
        for _ in range(5):
            b.content_update(chain, alice)
    mine = b.content_create(alice)  # bob writes in alice's chain: it goes whole
    b.content_update(mine, bob, authorization=b.write_credential(alice, bob, mine.content_id))
    theirs = b.content_create(bob)  # alice writes the head of bob's: it is rewound
    first = b.content_update(theirs, bob)
    b.content_update(theirs, alice, authorization=b.write_credential(bob, alice))
    b.countersign(alice, first)  # hers: it goes
    b.countersign(bob, mine.genesis_cid)  # of a removed op: it goes too
    for _ in range(3):
        b.beacon(alice)
    b.beacon(bob)
    return b.tokens, alice.did


async def log(store: RelayStore) -> dict[str, str]:
    return {e.cid: e.jws_token for e in await store.read_seq_range(0, 10**9, 10**6)}


async def test_a_purge_cut_short_is_finished_by_the_next_start(store: RelayStore) -> None:
    config = RelayConfig(purge_step_ops=STEP_OPS)
    now = 1_700_000_000_000
    tokens, alice = workload(now - DAY_MS)
    first = create_relay(store, config=config)
    async with first.running():
        assert {r.status for r in await first.ingest(tokens)} == {Status.NEW}
        planned = {op.cid for op in (await plan_purge(store, alice, now)).operations}
        kept = {cid: t for cid, t in (await log(store)).items() if cid not in planned}
        await store.put_ban(BanRecord(alice, "spam", now, "did:dfos:op"))
        steps: list[list[str]] = []

        async def after_step(done: bool) -> None:
            steps.append([f.line() for f in (await audit_store(store)).findings])
            if len(steps) == CUT_AFTER:
                raise Crash

        with pytest.raises(Crash):
            await purge_in_steps(store, alice, now, after_step, STEP_OPS)
        assert steps == [[]] * CUT_AFTER  # every step left the store clean
        assert await store.purges_under_way() == {alice: now}
        assert planned & (await log(store)).keys()  # some of it still there

    again = reopen(store)
    restarted = create_relay(again, config=config)
    async with restarted.running():
        for _ in range(SETTLES_WITHIN):
            if not await again.purges_under_way():
                break
            await asyncio.sleep(0.01)
        assert await again.purges_under_way() == {}
        assert await log(again) == kept
        assert sorted(p.cid for p in await again.list_purged(alice)) == sorted(planned)
        report = await audit_store(again)
        assert report.clean, [f.line() for f in report.findings]
