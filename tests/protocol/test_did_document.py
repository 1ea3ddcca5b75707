"""DID-METHOD.md section 4 "DID Document" and 5.2.2 "Resolution Metadata":
the document of the reference identity is the spec's example; every key in
every role becomes one verification method; a deleted identity has none."""

from __future__ import annotations

from relay.protocol import verify_identity_chain
from relay.protocol.did_document import did_datetime, did_document, did_resolution_result

from .conftest import NOW_MS, vector

SPEC_EXAMPLE = {
    "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
    "id": "did:dfos:e3vvtck42d4eacdnzvtrn6",
    "controller": "did:dfos:e3vvtck42d4eacdnzvtrn6",
    "verificationMethod": [
        {
            "id": "did:dfos:e3vvtck42d4eacdnzvtrn6#key_r9ev34fvc23z999veaaft8",
            "type": "Multikey",
            "controller": "did:dfos:e3vvtck42d4eacdnzvtrn6",
            "publicKeyMultibase": "z6MkrzLMNwoJSV4P3YccWcbtk8vd9LtgMKnLeaDLUqLuASjb",
        }
    ],
    "authentication": ["did:dfos:e3vvtck42d4eacdnzvtrn6#key_r9ev34fvc23z999veaaft8"],
    "assertionMethod": ["did:dfos:e3vvtck42d4eacdnzvtrn6#key_r9ev34fvc23z999veaaft8"],
    "capabilityInvocation": ["did:dfos:e3vvtck42d4eacdnzvtrn6#key_r9ev34fvc23z999veaaft8"],
}


def test_the_genesis_vector_resolves_to_the_spec_example() -> None:
    result = verify_identity_chain(vector("identity-genesis")["chain"], NOW_MS)
    assert did_document(result.operations[-1].state) == SPEC_EXAMPLE


def test_roles_follow_the_key_sets_after_rotation() -> None:
    result = verify_identity_chain(vector("identity-rotation")["chain"], NOW_MS)
    state = result.operations[-1].state
    doc = did_document(state)
    did = state.did
    assert doc["authentication"] == [f"{did}#{k.id}" for k in state.auth_keys]
    assert doc["assertionMethod"] == [f"{did}#{k.id}" for k in state.assert_keys]
    assert doc["capabilityInvocation"] == [f"{did}#{k.id}" for k in state.controller_keys]
    ids = [m["id"] for m in doc["verificationMethod"]]
    assert len(ids) == len(set(ids))
    assert set(ids) == {f"{did}#{k.id}" for k in state.all_keys()}


def test_a_deleted_identity_has_no_verification_methods() -> None:
    result = verify_identity_chain(vector("identity-delete")["chain"], NOW_MS)
    state = result.operations[-1].state
    assert state.is_deleted
    resolved = did_resolution_result(
        state, created_ms=1000, updated_ms=2500, operation_count=3, version_id="bafyhead"
    )
    doc = resolved["didDocument"]
    assert doc["verificationMethod"] == doc["authentication"] == []
    assert doc["assertionMethod"] == doc["capabilityInvocation"] == []
    assert resolved["didResolutionMetadata"] == {"contentType": "application/did+ld+json"}
    assert resolved["didDocumentMetadata"] == {
        "created": "1970-01-01T00:00:01Z",
        "updated": "1970-01-01T00:00:02Z",
        "deactivated": True,
        "operationCount": 3,
        "versionId": "bafyhead",
    }


def test_did_datetimes_are_utc_whole_seconds() -> None:
    assert did_datetime(1_772_841_600_999) == "2026-03-07T00:00:00Z"
