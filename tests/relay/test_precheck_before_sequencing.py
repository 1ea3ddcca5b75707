"""Signatures and CIDs are checked ahead of the serialized sequencing pass,
against keys from the signer's history and from the same request. That only
saves work: which key may sign at a given point is still decided in sequence,
so a key an identity has rotated away keeps failing."""

from __future__ import annotations

import httpx

from relay.ingest.common import Submitted
from relay.ingest.pipeline import prepare
from relay.ingest.precheck import precheck_submitted
from relay.protocol import (
    TYP_IDENTITY,
    Ed25519Keypair,
    MultikeyPublicKey,
    did_from_genesis_cid,
    format_timestamp,
    identity_create_payload,
    identity_update_payload,
    sign_operation,
)
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS, post, statuses


def _key(kp: Ed25519Keypair, key_id: str) -> MultikeyPublicKey:
    return MultikeyPublicKey(key_id, "Multikey", kp.multikey)


def _submitted(tokens: list[str]) -> list[tuple[int, Submitted]]:
    out = []
    for i, token in enumerate(tokens):
        sub = prepare(token)
        assert isinstance(sub, Submitted)
        out.append((i, sub))
    return out


async def test_ops_signed_by_stored_and_same_request_keys_are_prechecked(
    client: httpx.AsyncClient, store: RelayStore
) -> None:
    b = WorkloadBuilder(seed=71, start_ms=PAST_MS)
    alice = b.identity()
    await post(client, b.tokens)
    b.tokens.clear()
    b.content_create(alice)  # alice's key is in the store
    bob = b.identity()
    b.beacon(bob)  # bob's key arrives in this very request
    checked = await precheck_submitted(_submitted(b.tokens), set(), store)
    for _, sub in checked:
        assert sub.decoded.verified_key is not None, sub.kind
        assert sub.decoded.payload_cid is not None
        assert sub.decoded.payload_cid[0] == sub.cid
    assert statuses(await post(client, b.tokens)) == ["new"] * 3


async def test_sequenced_ops_are_not_prechecked_again(
    client: httpx.AsyncClient, store: RelayStore
) -> None:
    b = WorkloadBuilder(seed=72, start_ms=PAST_MS)
    b.identity()
    await post(client, b.tokens)
    submitted = _submitted(b.tokens)
    sequenced = await store.put_raw_ops([(s.cid, s.token) for _, s in submitted])
    assert sequenced == {submitted[0][1].cid}
    [(_, sub)] = await precheck_submitted(submitted, sequenced, store)
    assert sub.decoded.verified_key is None and sub.decoded.payload_cid is None


async def test_a_rotated_away_key_under_the_same_key_id_still_fails(
    client: httpx.AsyncClient,
) -> None:
    old, new = Ed25519Keypair.from_seed(b"\x01" * 32), Ed25519Keypair.from_seed(b"\x02" * 32)
    at = [format_timestamp(PAST_MS + i * 1000) for i in range(3)]
    genesis = sign_operation(
        TYP_IDENTITY,
        identity_create_payload([_key(old, "k")], [], [_key(old, "k")], at[0]),
        old,
        "k",
    )
    did = did_from_genesis_cid(genesis.cid)
    rotate = sign_operation(
        TYP_IDENTITY,
        identity_update_payload(genesis.cid, [_key(new, "k")], [], [_key(new, "k")], at[1]),
        old,
        f"{did}#k",
    )
    assert statuses(await post(client, [genesis.token, rotate.token])) == ["new", "new"]
    # "k" now names the new key; the old key (still in the history) signs anyway.
    stale = sign_operation(
        TYP_IDENTITY,
        identity_update_payload(rotate.cid, [_key(old, "k")], [], [_key(old, "k")], at[2]),
        old,
        f"{did}#k",
    )
    [result] = await post(client, [stale.token])
    assert result["status"] == "rejected" and "signature" in result["error"]


async def test_two_tokens_under_one_cid_are_prechecked_apart(
    client: httpx.AsyncClient, store: RelayStore
) -> None:
    b = WorkloadBuilder(seed=73, start_ms=PAST_MS)
    b.identity()
    good = b.tokens[0]
    forged = good[:-3] + "AAA"
    checked = await precheck_submitted(_submitted([good, forged]), set(), store)
    assert checked[0][1].decoded.verified_key is not None
    assert checked[1][1].decoded.verified_key is None
    assert statuses(await post(client, [good, forged])) == ["new", "rejected"]
