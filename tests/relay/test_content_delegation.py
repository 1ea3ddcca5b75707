"""PROTOCOL.md "Content Chain Authorization" through the relay: a non-creator
signer needs a DFOSContentWrite credential from the creator, checked at the
op's createdAt, scoped to the chain, and the signing kid's DID must be the
payload's ``did``."""

from __future__ import annotations

import httpx

from relay.protocol import (
    DFOS_CONTENT_WRITE,
    TYP_CONTENT,
    create_credential,
    decode_jws,
    sign_operation,
)
from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, post, statuses


async def test_delegate_with_credential_is_accepted(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=101, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    cred = b.write_credential(alice, bob, chain.content_id)
    edit = b.content_update(chain, bob, authorization=cred)
    assert statuses(await post(client, b.tokens)) == ["new"] * 4
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == edit and content["state"]["creatorDID"] == alice.did


async def test_delegate_without_credential_is_rejected(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=102, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    b.content_update(chain, bob)
    assert statuses(await post(client, b.tokens)) == ["new", "new", "new", "rejected"]


async def test_credential_narrowed_to_another_chain_is_rejected(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=103, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain, other = b.content_create(alice), b.content_create(alice)
    cred = b.write_credential(alice, bob, other.content_id)
    b.content_update(chain, bob, authorization=cred)
    b.content_update(other, bob, authorization=cred)
    assert statuses(await post(client, b.tokens)) == ["new"] * 4 + ["rejected", "new"]


async def test_credential_is_checked_at_the_op_created_at(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=104, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    iat = PAST_MS // 1000
    cred = create_credential(
        alice.keypair,
        alice.kid,
        alice.did,
        bob.did,
        DFOS_CONTENT_WRITE,
        iat,
        iat + 3600,
        chain.content_id,
    )
    # Valid at createdAt (even though it has long expired by wall clock) ...
    inside = b.content_update(chain, bob, authorization=cred, created_ms=PAST_MS + 1800_000)
    # ... and not after its exp.
    b.content_update(chain, bob, authorization=cred, created_ms=PAST_MS + 7200_000)
    results = await post(client, b.tokens)
    assert statuses(results) == ["new"] * 4 + ["rejected"]
    assert results[3]["cid"] == inside


async def test_kid_did_must_match_payload_did(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=105, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    await post(client, b.tokens)
    # Bob signs an update that claims to be by alice (payload did = alice).
    payload = dict(decode_jws(b.tokens[-1]).payload)
    payload.update(
        type="update", previousOperationCID=chain.genesis_cid, createdAt="2023-11-15T00:00:00.000Z"
    )
    forged = sign_operation(TYP_CONTENT, payload, bob.keypair, bob.kid).token
    [result] = await post(client, [forged])
    assert result["status"] == "rejected"
