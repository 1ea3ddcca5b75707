"""NUL is in no CID, DID, content id or key id, and a Postgres text column
cannot hold it: an identifier holding NUL is refused at the edge, the same on
every backend, and never fails the batch or request it came in.

- In a batch: an op whose kid, did, previousOperationCID or targetCID, or
  whose identity key id, holds NUL is rejected as malformed on its own line
  (it could never be satisfied, so it is not buffered); the rest proceed.
- A path id holding NUL answers 404 JSON; DID resolution keeps its own
  invalidDid answer."""

from __future__ import annotations

import httpx
import pytest

from relay import Relay
from relay.protocol import TYP_CONTENT, TYP_COUNTERSIGN, TYP_IDENTITY, format_timestamp
from relay.testing.workload import WorkloadBuilder, _key_json
from tests.support.relay_api import PAST_MS

NUL = "\x00"


def _content_update(b: WorkloadBuilder, signer_did: str, previous: str, **extra: object) -> dict:
    return {
        "version": 1,
        "type": "update",
        "did": signer_did,
        "previousOperationCID": previous,
        "documentCID": None,
        "baseDocumentCID": None,
        "createdAt": format_timestamp(b.tick()),
        "note": None,
        **extra,
    }


async def test_an_identifier_with_nul_is_malformed_and_the_batch_proceeds(relay: Relay) -> None:
    b = WorkloadBuilder(seed=91, start_ms=PAST_MS)
    author, witness = b.identity(), b.identity()
    chain = b.content_create(author)
    good = len(b.tokens)
    bad_previous = _content_update(b, author.did, chain.head_cid + NUL)
    b._emit(TYP_CONTENT, bad_previous, author.keypair, author.kid)
    bad_did = _content_update(b, author.did + NUL, chain.head_cid)
    b._emit(TYP_CONTENT, bad_did, author.keypair, author.kid)
    bad_target = {
        "version": 1,
        "type": "countersign",
        "did": witness.did,
        "targetCID": chain.genesis_cid + NUL,
        "createdAt": format_timestamp(b.tick()),
    }
    b._emit(TYP_COUNTERSIGN, bad_target, witness.keypair, witness.kid)
    keypair = b.keypair()
    key = {**_key_json(keypair), "id": "key_" + NUL}
    genesis = {
        "version": 1,
        "type": "create",
        "authKeys": [key],
        "assertKeys": [key],
        "controllerKeys": [key],
        "createdAt": format_timestamp(b.tick()),
    }
    b._emit(TYP_IDENTITY, genesis, keypair, _key_json(keypair)["id"])  # clean kid, NUL key id
    b.beacon(author)
    results = await relay.ingest(b.tokens)
    statuses = [r.status.value for r in results]
    assert statuses[:good] == ["new"] * good
    assert statuses[-1] == "new"
    bad = results[good:-1]
    assert [(r.status.value, r.reason and r.reason.value) for r in bad] == [
        ("rejected", "malformed")
    ] * 4
    assert [r.error for r in bad] == [
        "previousOperationCID must not contain NUL",
        "did must not contain NUL",
        "targetCID must not contain NUL",
        "authKeys key id must not contain NUL",
    ]
    assert await relay.store.get_unsequenced(10, None) == []  # nothing buffered


@pytest.mark.parametrize(
    "path",
    [
        "/operations/{cid}%00",
        "/operations/{cid}%00/countersignatures",
        "/countersignatures/{cid}%00",
        "/identities/{did}%00",
        "/identities/{did}%00/log",
        "/identities/{did}%00/tips",
        "/content/{content_id}%00",
        "/content/{content_id}%00/log",
        "/beacons/{did}%00",
    ],
)
async def test_a_path_id_with_nul_is_a_404(
    relay: Relay, client: httpx.AsyncClient, path: str
) -> None:
    b = WorkloadBuilder(seed=93, start_ms=PAST_MS)
    author = b.identity()
    chain = b.content_create(author)
    b.beacon(author)
    await relay.ingest(b.tokens)
    url = path.format(cid=chain.genesis_cid, did=author.did, content_id=chain.content_id)
    response = await client.get(url)
    assert response.status_code == 404, response.text
    assert response.json() == {"error": "not found"}


async def test_did_resolution_keeps_its_invalid_did_answer(client: httpx.AsyncClient) -> None:
    response = await client.get("/1.0/identifiers/did:dfos:abc%00")
    assert response.status_code == 400
    assert response.json()["didResolutionMetadata"] == {"error": "invalidDid"}
