"""The chain an op claims, read from its token unverified
(``relay.rules.claims``), is the chain the relay logs it on once verified:
for every kind, genesis and extension, a delegated write and a
countersignature; a content extension claims none (its parent's chain)."""

from __future__ import annotations

from relay import create_relay
from relay.protocol import decode_jws
from relay.rules.claims import claimed_chain
from relay.rules.classify import classify
from stores.memory import MemoryStore
from tests.scope.world import build_world, random_world


async def test_every_logged_op_claimed_the_chain_it_is_logged_on() -> None:
    tokens = build_world(seed=5).tokens + random_world(seed=6)
    relay = create_relay(MemoryStore())
    async with relay.running():
        await relay.ingest(tokens)
        head = await relay.store.log_length()
        entries = await relay.store.read_seq_range(0, head, head)
    kinds = set()
    for entry in entries:
        decoded = decode_jws(entry.jws_token)
        kind = classify(decoded.typ)
        assert kind == entry.kind
        claimed = claimed_chain(kind, entry.cid, decoded.payload, decoded.kid)
        if kind == "content-op" and decoded.payload.get("previousOperationCID") is not None:
            assert claimed is None, entry
        else:
            assert claimed == entry.chain_id, entry
        kinds.add((kind, claimed is None))
    assert {k for k, _ in kinds} == {
        "identity-op",
        "content-op",
        "countersign",
        "beacon",
        "artifact",
    }
    assert ("content-op", True) in kinds


def test_a_claim_that_cannot_be_read_is_none() -> None:
    assert claimed_chain("identity-op", "not-a-cid", {}, None) is None
    assert claimed_chain("identity-op", "x", {"previousOperationCID": "y"}, "did:x#k") is None
    assert claimed_chain("identity-op", "x", {"previousOperationCID": "y"}, "key_1") is None
    assert claimed_chain("countersign", "x", {"targetCID": 3}, None) is None
    assert claimed_chain("unknown", "x", {"did": "did:dfos:x"}, None) is None
