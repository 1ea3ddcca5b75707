"""WEB-RELAY.md "Ingestion Statuses" and "Result Ordering": new, duplicate,
rejected with a reason; same CID with a different token is rejected; results[i]
answers operations[i] in mixed batches."""

from __future__ import annotations

import httpx

from relay.protocol import TYP_IDENTITY, decode_jws, sign_jws
from relay.rules.outcomes import RejectReason, from_recorded_text, recorded_text
from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS, post, statuses
from tests.support.waiting_ops import forged_signature, signed_by


async def test_first_submission_is_new_and_resubmission_duplicate(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=1, start_ms=PAST_MS)
    alice = b.identity()
    b.content_create(alice)
    first = await post(client, b.tokens)
    assert statuses(first) == ["new", "new"]
    assert first[0] == {
        "cid": alice.head_cid,
        "status": "new",
        "kind": "identity-op",
        "chainId": alice.did,
    }
    again = await post(client, b.tokens)
    assert statuses(again) == ["duplicate", "duplicate"]
    assert [r["cid"] for r in again] == [r["cid"] for r in first]
    assert "error" not in again[0]


async def test_rejection_carries_cid_and_reason(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=2, start_ms=PAST_MS)
    alice = b.identity()
    token = b.tokens[0]
    head, payload, sig = token.split(".")
    flipped = sig[:-2] + ("AA" if sig[-2:] != "AA" else "BA")
    [result] = await post(client, [f"{head}.{payload}.{flipped}"])
    assert result["status"] == "rejected"
    assert result["cid"] == alice.head_cid
    assert "signature" in result["error"]


async def test_a_token_refused_for_good_is_answered_the_same_when_sent_again(
    client: httpx.AsyncClient,
) -> None:
    """The second answer comes from the recorded rejection: same reason, same
    message, whatever the reason was."""
    b = WorkloadBuilder(seed=5, start_ms=PAST_MS)
    alice = b.identity()
    b.artifact(alice)
    genesis, artifact = b.tokens
    assert statuses(await post(client, [genesis])) == ["new"]
    reasons = []
    for bad in (forged_signature(artifact), signed_by(artifact, b.identity())):
        first = (await post(client, [bad]))[0]
        again = (await post(client, [bad]))[0]
        assert first["status"] == again["status"] == "rejected"
        assert (again["reason"], again["error"]) == (first["reason"], first["error"])
        reasons.append(first["reason"])
    assert reasons[0] == "bad-signature"


async def test_same_cid_with_a_different_token_is_rejected(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=3, start_ms=PAST_MS)
    b.identity()
    genuine = b.tokens[0]
    decoded = decode_jws(genuine)
    # Same header and payload (so same CID) signed by another key: another token.
    other = WorkloadBuilder(seed=4).keypair()
    forged = sign_jws(decoded.header, decoded.payload, other)
    assert forged != genuine and decode_jws(forged).header_cid == decoded.header_cid
    assert statuses(await post(client, [genuine])) == ["new"]
    [result] = await post(client, [forged])
    assert result["status"] == "rejected" and result["cid"] == decoded.header_cid
    # The genuine token is still a plain duplicate.
    assert statuses(await post(client, [genuine])) == ["duplicate"]


async def test_forged_token_does_not_block_the_genuine_one(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=5, start_ms=PAST_MS)
    b.identity()
    genuine = b.tokens[0]
    decoded = decode_jws(genuine)
    forged = sign_jws(decoded.header, decoded.payload, WorkloadBuilder(seed=6).keypair())
    assert statuses(await post(client, [forged])) == ["rejected"]
    assert statuses(await post(client, [genuine])) == ["new"]


async def test_results_answer_operations_in_input_order(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=7, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    b.beacon(alice)
    art = b.artifact(bob)
    b.countersign(alice, art)
    tokens = list(b.tokens)
    await post(client, tokens[:1])  # alice's genesis becomes a duplicate
    batch = [*reversed(tokens), "garbage", tokens[0]]
    results = await post(client, batch)
    expected_cids = [decode_jws(t).header_cid for t in reversed(tokens)]
    assert [r["cid"] for r in results[: len(tokens)]] == expected_cids
    kinds = [r.get("kind") for r in results[: len(tokens)]]
    assert kinds == [
        "countersign",
        "artifact",
        "beacon",
        "content-op",
        "content-op",
        "identity-op",
        "identity-op",
    ]
    assert statuses(results) == ["new"] * 6 + ["duplicate", "rejected", "duplicate"]
    assert results[0]["chainId"] == art
    assert results[3]["chainId"] == chain.content_id
    assert results[5]["chainId"] == bob.did


async def test_unknown_typ_is_rejected(client: httpx.AsyncClient) -> None:
    kp = WorkloadBuilder(seed=8).keypair()
    token = sign_jws(
        {"alg": "EdDSA", "typ": "did:dfos:mystery", "kid": kp.key_id}, {"version": 1}, kp
    )
    [result] = await post(client, [token])
    assert result["status"] == "rejected" and "typ" in result["error"]
    assert TYP_IDENTITY != "did:dfos:mystery"


def test_a_rejection_recorded_before_reasons_were_kept_reads_as_chain_rule() -> None:
    assert from_recorded_text("invalid signature") == (RejectReason.CHAIN_RULE, "invalid signature")
    text = recorded_text(RejectReason.BAD_SIGNATURE, "invalid signature\tand more")
    assert from_recorded_text(text) == (RejectReason.BAD_SIGNATURE, "invalid signature\tand more")
    assert from_recorded_text("no-such-reason\tx") == (RejectReason.CHAIN_RULE, "no-such-reason\tx")
