"""WEB-RELAY.md "Identity State" / "Content State" and openapi.yaml: the
shapes of GET /operations/{cid}, /identities/{did} and /content/{id}; 404s."""

from __future__ import annotations

import httpx
import pytest

from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, post


async def test_operation_shape(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=121, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    await post(client, b.tokens)
    assert await get_json(client, f"/operations/{alice.head_cid}") == {
        "cid": alice.head_cid,
        "jwsToken": b.tokens[0],
        "chainType": "identity",
        "chainId": alice.did,
        "kind": "identity-op",
    }
    op = await get_json(client, f"/operations/{chain.genesis_cid}")
    assert op["chainType"] == "content" and op["chainId"] == chain.content_id


async def test_identity_state_shape(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=122, start_ms=PAST_MS)
    alice = b.identity()
    b.rotate(alice)
    await post(client, b.tokens)
    body = await get_json(client, f"/identities/{alice.did}")
    key = {
        "id": alice.keypair.key_id,
        "type": "Multikey",
        "publicKeyMultibase": alice.keypair.multikey,
    }
    assert body == {
        "did": alice.did,
        "headCID": alice.head_cid,
        "state": {
            "did": alice.did,
            "isDeleted": False,
            "authKeys": [key],
            "assertKeys": [key],
            "controllerKeys": [key],
        },
    }


async def test_content_state_shape(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=123, start_ms=PAST_MS)
    alice = b.identity()
    doc = b.document(alice)
    chain = b.content_create(alice, doc)
    b.content_update(chain, clear=True)
    await post(client, b.tokens)
    body = await get_json(client, f"/content/{chain.content_id}")
    assert body == {
        "contentId": chain.content_id,
        "genesisCID": chain.genesis_cid,
        "headCID": chain.head_cid,
        "state": {
            "contentId": chain.content_id,
            "genesisCID": chain.genesis_cid,
            "headCID": chain.head_cid,
            "isDeleted": False,
            "currentDocumentCID": None,
            "length": 2,
            "creatorDID": alice.did,
        },
    }


@pytest.mark.parametrize(
    "path",
    [
        "/operations/bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
        "/operations/not-a-cid",
        "/identities/did:dfos:nobodyhere000000000000",
        "/identities/garbage",
        "/content/nothinghere0000000000",
    ],
)
async def test_unknown_is_404(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)
    assert response.status_code == 404 and "error" in response.json()


async def test_routes_do_not_cross_chain_kinds(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=124, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    await post(client, b.tokens)
    assert (await client.get(f"/content/{alice.did}")).status_code == 404
    assert (await client.get(f"/identities/{chain.content_id}")).status_code == 404
