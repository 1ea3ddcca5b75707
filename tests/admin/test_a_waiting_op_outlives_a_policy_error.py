"""An op answered waiting was kept: when its dependency arrives and the write
policy fails on it (``policy-error``: the call raised or was late), it stays
in the pending buffer, because nobody will send it again, and sequences
when it is next attempted (here: the buffer drain of a restart)."""

from __future__ import annotations

import time
from dataclasses import replace

from relay import create_relay
from relay.audit import audit_store
from relay.ingest.policy import VerifiedOp, WritePolicy
from relay.rules.outcomes import RejectReason, Status
from stores.base import RelayStore
from tests.stores.conftest import reopen
from tests.support.waiting_ops import chain_with_a_gap


async def test_a_woken_op_the_policy_fails_on_stays_buffered(store: RelayStore) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(seed=41)

    def late_on_the_waiting_op(op: VerifiedOp, signer: str) -> None:
        if op.cid == waiting_cid:
            time.sleep(1.0)  # past the timeout below: policy-error

    relay = create_relay(store)
    async with relay.running():
        first = await relay.ingest([identity, genesis, update2])
        assert first[2].reason is RejectReason.MISSING_PREVIOUS  # answered: waiting
        policy = WritePolicy(late_on_the_waiting_op, "late_on_the_waiting_op")
        relay.gate.policy = replace(policy, timeout_s=0.2)
        assert (await relay.ingest([update1]))[0].status is Status.NEW
        assert await relay.store.get_operation(waiting_cid) is None
        buffered = {p.cid for p in await relay.store.get_unsequenced(10, None)}
        assert waiting_cid in buffered, "an op answered waiting was dropped"
        # sent again (a peer's replay, say) while the policy still fails: that
        # line is refused, the op stays buffered for its first sender
        resent = (await relay.ingest([update2]))[0]
        assert resent.reason is RejectReason.POLICY_ERROR
        buffered = {p.cid for p in await relay.store.get_unsequenced(10, None)}
        assert waiting_cid in buffered, "an op answered waiting was dropped when sent again"
        report = await audit_store(relay.store)
        assert report.clean, [f.line() for f in report.findings]

    again = create_relay(reopen(store))
    async with again.running():  # the restart's drain attempts it, no policy now
        assert await again.store.get_operation(waiting_cid) is not None
        assert await again.store.count_unsequenced() == 0
