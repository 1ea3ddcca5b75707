"""The receiving side of sender proofs between real relays on loopback: a
push naming relay A is A's (never pushed back to it, hops honoured) only
with a proof signed by A's identity key for the receiver's DID, within its
lifetime. A wrong-audience or expired proof, even one A signed, leaves the
push a client's. A receiver that does not hold A's identity yet (a fresh
pairing) reads it from A first (and keeps it in memory only)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from peer.base import RELAY_SENDER_HEADER, RELAY_SENDER_PROOF_HEADER
from relay import Relay
from relay.peering.sender_auth import REASONS
from relay.peering.sender_proof import (
    SENDER_PROOF_BACKDATE_S,
    SENDER_PROOF_LIFETIME_S,
    push_audience,
)
from relay.testing.workload import mixed_workload
from tests.peering.loopback_pair import Pair, loopback_pair, unproven
from tests.support.relay_api import PAST_MS


async def push_naming_a(pair: Pair, proof: str, tokens: list[str]) -> list[str]:
    """A plain client posts ``tokens`` to B naming A with ``proof``; their CIDs."""
    headers = {RELAY_SENDER_HEADER: pair.relays[0].did, RELAY_SENDER_PROOF_HEADER: proof}
    async with httpx.AsyncClient(timeout=10) as plain:
        answer = await plain.post(
            pair.urls[1] + "/operations", json={"operations": tokens}, headers=headers
        )
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert {r["status"] for r in results} == {"new"}
    await pair.settle()
    return [r["cid"] for r in results]


def signed_by(relay: Relay, receiver: str, iat: int, exp: int) -> str:
    """``relay``'s sender proof for pushes to the relay whose DID is ``receiver``."""
    return relay.sign_auth_token(push_audience(receiver), iat, exp)


async def test_a_valid_proof_makes_the_push_the_named_peers(tmp_path: Path) -> None:
    tokens = mixed_workload(12, seed=51, now_ms=PAST_MS)
    async with loopback_pair(tmp_path) as pair:
        a, b = pair.relays
        now = int(time.time())
        proof = signed_by(a, b.did, now - SENDER_PROOF_BACKDATE_S, now + SENDER_PROOF_LIFETIME_S)
        cids = await push_naming_a(pair, proof, tokens)
        # B took them as A's: noted as sent by A, so not pushed back to it
        assert all(pair.peering(1).sent_us(pair.urls[0], cid) for cid in cids)
        assert await pair.missing_at(0, cids) == cids
        assert unproven(b, "invalid") == unproven(b, "missing") == 0


@pytest.mark.parametrize("bad", ["wrong-audience", "expired"])
async def test_a_wrong_audience_or_expired_proof_leaves_the_push_a_clients(
    tmp_path: Path, bad: str
) -> None:
    tokens = mixed_workload(12, seed=52, now_ms=PAST_MS)
    async with loopback_pair(tmp_path) as pair:
        a, b = pair.relays
        now = int(time.time())
        if bad == "wrong-audience":  # A's proof for another relay (here: A itself)
            proof = signed_by(a, a.did, now - 60, now + 300)
        else:
            proof = signed_by(a, b.did, now - 400, now - 1)
        cids = await push_naming_a(pair, proof, tokens)
        # a client's push: B gossips the ops to A
        assert await pair.missing_at(0, cids) == []
        assert not any(pair.peering(1).sent_us(pair.urls[0], cid) for cid in cids)
        assert unproven(b, "invalid") == 1


async def test_a_receiver_without_the_senders_identity_reads_it_from_the_sender(
    tmp_path: Path,
) -> None:
    tokens = mixed_workload(12, seed=53, now_ms=PAST_MS)
    # B gossips to A, A to nobody: A's identity never reaches B by itself
    async with loopback_pair(tmp_path, gossips_to=((), (0,))) as pair:
        a, b = pair.relays
        assert await b.store.get_chain(a.did) is None
        now = int(time.time())
        proof = signed_by(a, b.did, now - SENDER_PROOF_BACKDATE_S, now + SENDER_PROOF_LIFETIME_S)
        cids = await push_naming_a(pair, proof, tokens)
        assert await b.store.get_chain(a.did) is None  # read to check, not stored
        assert all(pair.peering(1).sent_us(pair.urls[0], cid) for cid in cids)
        assert await pair.missing_at(0, cids) == cids
        assert unproven(b, "unknown_identity") == 0


async def test_real_relays_prove_every_push_with_one_verification_per_token(
    tmp_path: Path,
) -> None:
    tokens = mixed_workload(150, seed=54, now_ms=PAST_MS)
    async with loopback_pair(tmp_path) as pair:
        a, b = pair.relays
        # (at start-up a relay may push before its peer listens: a peer
        # reading the pusher's identity then fails once; counted from here)
        before = [unproven(r, reason) for r in (a, b) for reason in REASONS]
        verified_before = pair.peering(1).senders.verifications
        async with httpx.AsyncClient(timeout=10) as plain:
            for token in tokens:  # one op per POST: many pushes from A to B
                answer = await plain.post(
                    pair.urls[0] + "/operations", json={"operations": [token]}
                )
                assert answer.status_code == 200
        await pair.settle()
        assert [unproven(r, reason) for r in (a, b) for reason in REASONS] == before
        # A reused its proof for B; B verified it at most once, for many pushes
        assert pair.peering(0).proofs.minted == 1
        assert pair.peering(1).senders.verifications - verified_before <= 1
        assert pair.peering(1).senders.proven_pushes > 10
