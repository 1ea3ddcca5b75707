"""A purge is planned under the sequencing lock, so its work must grow with
what it removes, not with its square: a DID that wrote the head of many
other signers' chains once had every rewound chain scan the ops of all of
them (4000 such chains: 0.74 s under the lock; 16000: about 12 s). The
relay purges in steps (``purge_in_steps``); here in one step, every chain
rewound in it."""

from __future__ import annotations

from pathlib import Path

from relay import create_relay
from relay.admin.purge_steps import purge_in_steps
from relay.rules.outcomes import Status
from relay.testing.workload import DAY_MS, WorkloadBuilder
from stores.memory import MemoryStore
from stores.moderation import BanRecord
from tests.support.counting_ops import CountedOp, CountingStore

CHAINS = 200
NOW = 1_700_000_000_000


async def _told(last: bool) -> None:
    pass


async def test_a_purge_looks_at_each_op_of_the_chains_it_rewinds_a_bounded_number_of_times(
    tmp_path: Path,
) -> None:
    b = WorkloadBuilder(seed=16, start_ms=1_700_000_000_000 - DAY_MS)
    bob, alice = b.identity(), b.identity()
    grant = b.write_credential(bob, alice)
    for _ in range(CHAINS):  # alice writes the head of each of bob's chains
        b.content_update(b.content_create(bob), alice, authorization=grant)
    store = MemoryStore()
    relay = create_relay(store)
    async with relay.running():
        assert {r.status for r in await relay.ingest(b.tokens)} == {Status.NEW}
    await store.put_ban(BanRecord(alice.did, "spam", NOW, "did:dfos:op"))
    counting = CountingStore(store)

    totals = await purge_in_steps(counting, alice.did, NOW, _told, 4 * CHAINS)  # type: ignore[arg-type]

    assert totals.steps == 1 and len(totals.chains_rewound) == CHAINS
    assert counting.read >= 2 * CHAINS
    looks = CountedOp.looks["chain_id"]
    assert looks <= 8 * counting.read, (looks, counting.read)
