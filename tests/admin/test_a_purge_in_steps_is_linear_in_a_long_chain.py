"""A purge in steps rewinds a chain that loses its head in each step to the
head rule over what remains of it; that must not scan what remains once a
step: a chain of N ops in steps of S was looked at about N * N / 2S times
(40 000 ops in steps of 250: 3.2 million looks, over 9 s of a 19 s purge)."""

from __future__ import annotations

from relay import create_relay
from relay.admin.purge_steps import purge_in_steps
from relay.audit import audit_store
from relay.rules.outcomes import Status
from relay.testing.workload import DAY_MS, WorkloadBuilder
from stores.base import RelayStore
from stores.moderation import BanRecord
from tests.support.counting_ops import CountedOp, CountingStore

CHAIN_OPS = 600
STEP_OPS = 4  # 150 steps, each rewinding the chain
NOW = 1_700_000_000_000


async def _told(last: bool) -> None:
    pass


async def test_a_purge_looks_at_each_op_of_a_long_chain_a_bounded_number_of_times(
    store: RelayStore,
) -> None:
    b = WorkloadBuilder(seed=16, start_ms=NOW - DAY_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    for _ in range(CHAIN_OPS - 1):
        b.content_update(chain, alice)
    relay = create_relay(store)
    async with relay.running():
        assert {r.status for r in await relay.ingest(b.tokens)} == {Status.NEW}
        await store.put_ban(BanRecord(alice.did, "spam", NOW, "did:dfos:op"))
        counting = CountingStore(store)

        totals = await purge_in_steps(counting, alice.did, NOW, _told, STEP_OPS)  # type: ignore[arg-type]

        assert len(totals.operations) == CHAIN_OPS + 1 and totals.steps >= CHAIN_OPS // STEP_OPS
        assert counting.read >= CHAIN_OPS
        looks = CountedOp.looks["cid"]
        assert looks <= 20 * counting.read, (looks, counting.read)
        assert await store.operations_signed_by(alice.did) == []
        report = await audit_store(store)
        assert report.clean, [f.line() for f in report.findings]
