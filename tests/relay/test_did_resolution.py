"""``GET /1.0/identifiers/{did}`` (DID-METHOD.md 5.2, additive): the DID
document of the identity's head state inside a resolution result, the bare
document on ``Accept: application/did+ld+json``, 410 with ``deactivated``
for a deleted identity, 400 ``invalidDid`` and 404 ``notFound``. In-process
and over hypercorn, on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay.protocol.did_document import did_datetime
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS, get_json, post
from tests.support.served import TRANSPORTS, Served, served_relay

RESOLUTION_TYPE = 'application/ld+json;profile="https://w3id.org/did-resolution"'


@pytest.fixture(params=TRANSPORTS)
async def served(store: RelayStore, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    async with served_relay(store, request.param) as s:
        yield s


async def test_resolves_the_current_keys_with_metadata(served: Served) -> None:
    b = WorkloadBuilder(seed=191, start_ms=PAST_MS)
    alice = b.identity()
    created_ms = alice.head_ms
    b.rotate(alice)
    await post(served.client, b.tokens)
    response = await served.client.get(f"/1.0/identifiers/{alice.did}")
    assert response.status_code == 200
    assert response.headers["content-type"] == RESOLUTION_TYPE
    result = response.json()
    assert result["@context"] == "https://w3id.org/did-resolution/v1"
    doc = result["didDocument"]
    key_url = f"{alice.did}#{alice.keypair.key_id}"  # the rotated-in key only
    assert (doc["id"], doc["controller"]) == (alice.did, alice.did)
    assert doc["verificationMethod"] == [
        {
            "id": key_url,
            "type": "Multikey",
            "controller": alice.did,
            "publicKeyMultibase": alice.keypair.multikey,
        }
    ]
    for role in ("authentication", "assertionMethod", "capabilityInvocation"):
        assert doc[role] == [key_url]
    assert result["didResolutionMetadata"] == {"contentType": "application/did+ld+json"}
    assert result["didDocumentMetadata"] == {
        "created": did_datetime(created_ms),
        "updated": did_datetime(alice.head_ms),
        "deactivated": False,
        "operationCount": 2,
        "versionId": alice.head_cid,
    }


async def test_the_bare_document_on_request(served: Served) -> None:
    known = await get_json(served.client, "/.well-known/dfos-relay")
    for media_type in ("application/did+ld+json", "application/did+json"):
        response = await served.client.get(
            f"/1.0/identifiers/{known['did']}", headers={"accept": media_type}
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == media_type
        assert response.json()["id"] == known["did"]
        assert "didDocument" not in response.json()


async def test_a_deleted_identity_is_gone_and_deactivated(served: Served) -> None:
    b = WorkloadBuilder(seed=192, start_ms=PAST_MS)
    alice = b.identity()
    b.delete_identity(alice)
    await post(served.client, b.tokens)
    response = await served.client.get(f"/1.0/identifiers/{alice.did}")
    assert response.status_code == 410
    result = response.json()
    assert result["didDocumentMetadata"]["deactivated"] is True
    assert result["didDocumentMetadata"]["operationCount"] == 2
    assert result["didDocument"]["verificationMethod"] == []


@pytest.mark.parametrize(
    ("did", "status", "code"),
    [
        pytest.param("did:web:example.com", 400, "invalidDid", id="other-method"),
        pytest.param("did:dfos:short", 400, "invalidDid", id="bad-id"),
        pytest.param("bafyreiabc", 400, "invalidDid", id="not-a-did"),
        pytest.param(None, 404, "notFound", id="unknown"),
    ],
)
async def test_bad_and_unknown_dids(
    served: Served, did: str | None, status: int, code: str
) -> None:
    did = did or WorkloadBuilder(seed=193, start_ms=PAST_MS).identity().did
    response = await served.client.get(f"/1.0/identifiers/{did}")
    assert response.status_code == status
    body = response.json()
    assert body["didResolutionMetadata"] == {"error": code} and body["error"]
