"""An op whose payload does not parse as its kind's (here a ``createdAt``
that is no timestamp, or a field its schema does not have) can never be
accepted: verification parses the payload first, and the schema reads no
chain state. One that also misses its parent, signer or target is rejected
at once (``malformed``, the verifier's text), not answered waiting and
parked until its dependency arrives only to be rejected then; and such ops
left in the buffer by an older version are rejected by the restart's drain
(as ``test_a_future_op_is_rejected_not_parked`` does for the future guard)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relay import create_relay
from relay.protocol import decode_jws, sign_operation
from relay.rules.outcomes import RejectReason
from relay.testing.workload import Actor, WorkloadBuilder
from stores.base import CommitBatch, PendingOp, RelayStore, waits_for_op
from tests.stores.conftest import reopen
from tests.support.relay_api import PAST_MS

BAD_DATE = "createdAt must be ISO 8601 in UTC with milliseconds (2026-03-07T00:00:00.000Z)"


def _resigned(token: str, signer: Actor, **changes: Any) -> tuple[str, str]:
    """``token`` with its payload changed, signed again by ``signer`` under
    the same kid and with the CID of the new payload: (token, CID)."""
    decoded = decode_jws(token)
    payload = {**decoded.payload, **changes}
    kid = decoded.kid
    assert decoded.typ is not None and kid is not None
    signed = sign_operation(decoded.typ, payload, signer.keypair, kid)
    return signed.token, signed.cid


# Each case: the tokens to send, the last one waiting for a dependency
# never sent, and the signer of that last one.
Case = Callable[[WorkloadBuilder], tuple[list[str], Actor]]


def _content_update(b: WorkloadBuilder) -> tuple[list[str], Actor]:
    author = b.identity()
    chain = b.content_create(author)
    b.content_update(chain)  # never sent: the parent
    b.content_update(chain)
    identity, genesis, _, late = b.tokens
    return [identity, genesis, late], author


def _identity_update(b: WorkloadBuilder) -> tuple[list[str], Actor]:
    author = b.identity()
    b.rotate(author)  # never sent: the parent
    b.rotate(author)
    genesis, _, late = b.tokens
    return [genesis, late], author


def _beacon(b: WorkloadBuilder) -> tuple[list[str], Actor]:
    author = b.identity()  # never sent: the signer
    b.beacon(author)
    return [b.tokens[1]], author


def _artifact(b: WorkloadBuilder) -> tuple[list[str], Actor]:
    author = b.identity()  # never sent: the signer
    b.artifact(author)
    return [b.tokens[1]], author


def _countersign(b: WorkloadBuilder) -> tuple[list[str], Actor]:
    author, witness = b.identity(), b.identity()
    target = b.content_create(author).genesis_cid  # never sent: the target
    b.countersign(witness, target)
    return [b.tokens[1], b.tokens[3]], witness


CASES: dict[str, Case] = {
    "content-op": _content_update,
    "identity-op": _identity_update,
    "beacon": _beacon,
    "artifact": _artifact,
    "countersign": _countersign,
}


def _malformed(kind: str, seed: int, **changes: Any) -> tuple[list[str], str]:
    tokens, signer = CASES[kind](WorkloadBuilder(seed=seed, start_ms=PAST_MS))
    tokens[-1], cid = _resigned(tokens[-1], signer, **changes)
    return tokens, cid


@pytest.mark.parametrize("kind", sorted(CASES))
async def test_an_op_with_an_unparsable_created_at_is_rejected_not_parked(
    store: RelayStore, kind: str
) -> None:
    tokens, cid = _malformed(kind, 81, createdAt="yesterday")
    relay = create_relay(store)
    async with relay.running():
        results = await relay.ingest(tokens)
        assert [r.status.value for r in results[:-1]] == ["new"] * (len(tokens) - 1)
        last = results[-1]
        assert (last.status.value, last.reason, last.error) == (
            "rejected", RejectReason.MALFORMED, BAD_DATE,
        ), last  # fmt: skip
        assert last.waits_for is None
        assert await relay.store.count_unsequenced() == 0
        [status] = await relay.status.explain_many([cid])
        assert status.note is not None
        assert (status.note.reason, status.note.detail) == ("malformed", BAD_DATE)


async def test_an_op_with_a_field_its_schema_lacks_is_rejected_not_parked(
    store: RelayStore,
) -> None:
    tokens, _ = _malformed("content-op", 82, extra="not in the schema")
    relay = create_relay(store)
    async with relay.running():
        last = (await relay.ingest(tokens))[-1]
        assert (last.reason, last.waits_for) == (RejectReason.MALFORMED, None), last
        assert await relay.store.count_unsequenced() == 0


async def test_malformed_ops_an_older_version_buffered_are_rejected_at_restart(
    store: RelayStore,
) -> None:
    tokens, cid = _malformed("content-op", 83, createdAt="yesterday")
    late = tokens[-1]
    parent = decode_jws(late).payload["previousOperationCID"]
    await store.open()
    try:  # parked as an older version did: waiting for its parent
        async with store.sequencing() as session:
            waiting = {cid: PendingOp(cid, late, waits_for_op(parent), PAST_MS)}
            await session.commit(CommitBatch(waiting=waiting))
    finally:
        await store.close()
    relay = create_relay(reopen(store))
    async with relay.running():
        assert await relay.store.count_unsequenced() == 0
        [status] = await relay.status.explain_many([cid])
        assert status.note is not None
        assert (status.note.reason, status.note.detail) == ("malformed", BAD_DATE)
