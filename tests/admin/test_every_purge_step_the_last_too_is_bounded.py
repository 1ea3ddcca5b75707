"""Every step of a purge holds the sequencing lock for a bounded work, the
last one too: it removes at most ``--purge-step-ops`` ops and drops at most
as many of the DID's buffered ops, and leaves the store auditing clean. The
last step once removed the whole identity chain with its keys (a DID that
rotated its keys 30 000 times: 30 000 ops in one step) and read the whole
raw buffer, every DID's, under the lock."""

from __future__ import annotations

from itertools import pairwise

from relay import create_relay
from relay.admin.purge import buffered_by
from relay.admin.purge_steps import purge_in_steps
from relay.audit import audit_store
from relay.rules.outcomes import Status
from relay.testing.workload import DAY_MS, WorkloadBuilder
from stores.base import RelayStore
from stores.moderation import BanRecord

STEP_OPS = 4
ROTATIONS, UPDATES, WAITING = 13, 9, 10
NOW = 1_700_000_000_000


async def test_no_step_of_a_purge_removes_or_drops_more_than_step_ops(store: RelayStore) -> None:
    b = WorkloadBuilder(seed=16, start_ms=NOW - DAY_MS)
    alice, bob = b.identity(), b.identity()
    for _ in range(ROTATIONS):
        b.content_update(b.content_create(bob), bob)  # ops of another DID between hers
        b.rotate(alice)
    chain = b.content_create(alice)
    for _ in range(UPDATES):
        b.content_update(chain, alice)
    unsent = b.content_create(alice)  # never sent: the updates after it wait for it
    skipped = len(b.tokens) - 1
    for _ in range(WAITING):
        b.content_update(unsent, alice)
    tokens = b.tokens[:skipped] + b.tokens[skipped + 1 :]
    relay = create_relay(store)
    async with relay.running():
        results = await relay.ingest(tokens)
        assert sum(r.status is Status.NEW for r in results) == len(tokens) - WAITING
        assert len(await buffered_by(store, alice.did)) == WAITING
        await store.put_ban(BanRecord(alice.did, "spam", NOW, "did:dfos:op"))
        signed = len(await store.operations_signed_by(alice.did))
        left = [(signed, WAITING)]
        findings: list[str] = []

        async def after_step(last: bool) -> None:
            ops = len(await store.operations_signed_by(alice.did))
            left.append((ops, len(await buffered_by(store, alice.did))))
            findings.extend(f.line() for f in (await audit_store(store)).findings)

        totals = await purge_in_steps(store, alice.did, NOW, after_step, STEP_OPS)

        assert left[-1] == (0, 0) and len(totals.operations) == signed
        removed = [a[0] - b[0] for a, b in pairwise(left)]
        dropped = [a[1] - b[1] for a, b in pairwise(left)]
        assert max(removed) <= STEP_OPS and max(dropped) <= STEP_OPS, (removed, dropped)
        assert findings == []
        assert await store.get_identity_keys([alice.did]) == {}
        assert await store.get_chain(alice.did) is None
