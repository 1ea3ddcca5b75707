"""Payload schemas and "Operation Field Limits": exact limits pass, one more fails;
version/type literals; required and nullable fields (unknown fields: see
test_payload_fields_are_strict)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relay.protocol import (
    MalformedError,
    MultikeyPublicKey,
    content_create_payload,
    content_delete_payload,
    content_update_payload,
    identity_create_payload,
    identity_delete_payload,
    identity_update_payload,
    parse_artifact,
    parse_beacon,
    parse_content_operation,
    parse_countersign,
    parse_identity_operation,
)

from .conftest import CREATOR_DID, ref_key

TS = "2026-03-07T00:00:00.000Z"
CID = "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa"
ROOT = "7e80d4780f454e0fca0b090d8c646f572b49354f54154531606105aad2fda28e"
K1 = ref_key(1)


def _key(key_id: str = K1.key_id, multibase: str = K1.multikey) -> dict[str, object]:
    return {"id": key_id, "type": "Multikey", "publicKeyMultibase": multibase}


def identity_create(**changes: Any) -> dict[str, Any]:
    return {**identity_create_payload([K1], [K1], [K1], TS), **changes}


def content_update(**changes: Any) -> dict[str, Any]:
    return {**content_update_payload(CREATOR_DID, CID, CID, TS), **changes}


ParseCase = tuple[Callable[[dict[str, Any]], object], dict[str, Any]]

ACCEPTED: dict[str, ParseCase] = {
    "key-id-64": (parse_identity_operation, identity_create(authKeys=[_key("k" * 64)])),
    "16-keys": (parse_identity_operation, identity_create(assertKeys=[_key()] * 16)),
    "empty-auth-keys": (parse_identity_operation, identity_create(authKeys=[])),
    "version-1.0": (parse_identity_operation, identity_create(version=1.0)),
    "did-256": (parse_content_operation, content_update(did="d" * 256)),
    "previous-256": (parse_content_operation, content_update(previousOperationCID="c" * 256)),
    "document-256": (parse_content_operation, content_update(documentCID="c" * 256)),
    "note-256": (parse_content_operation, content_update(note="n" * 256)),
    "document-null": (parse_content_operation, content_update(documentCID=None)),
    "authorization-absent": (parse_content_operation, content_update()),
    # limits count UTF-16 code units, as JavaScript's length (the reference's Zod)
    "note-128-astral": (parse_content_operation, content_update(note="\U0001f600" * 128)),
    "note-255-and-an-accent": (parse_content_operation, content_update(note="e" * 255 + "\u00e9")),
    "key-id-32-astral": (
        parse_identity_operation,
        identity_create(authKeys=[_key("\U0001f600" * 32)]),
    ),
}

REJECTED: dict[str, tuple[ParseCase, str]] = {
    "key-id-65": (
        (parse_identity_operation, identity_create(authKeys=[_key("k" * 65)])),
        "64 characters",
    ),
    "multibase-129": (
        (parse_identity_operation, identity_create(authKeys=[_key(multibase="z" * 129)])),
        "128 characters",
    ),
    "multibase-not-a-key": (
        (parse_identity_operation, identity_create(authKeys=[_key(multibase="z6Mk")])),
        "multikey",
    ),
    "key-type-not-multikey": (
        (parse_identity_operation, identity_create(authKeys=[{**_key(), "type": "JsonWebKey"}])),
        "Multikey",
    ),
    "17-keys": ((parse_identity_operation, identity_create(controllerKeys=[_key()] * 17)), "16"),
    "no-controller-keys": (
        (parse_identity_operation, identity_create(controllerKeys=[])),
        "controller key",
    ),
    "update-no-controller-keys": (
        (parse_identity_operation, identity_update_payload(CID, [K1], [K1], [], TS)),
        "controller key",
    ),
    "create-with-previous": (
        (parse_identity_operation, identity_create(previousOperationCID=CID)),
        "previousOperationCID",
    ),
    "delete-without-previous": (
        (parse_identity_operation, {"version": 1, "type": "delete", "createdAt": TS}),
        "previousOperationCID",
    ),
    "version-2": ((parse_identity_operation, identity_create(version=2)), "version"),
    "version-true": ((parse_identity_operation, identity_create(version=True)), "version"),
    "version-string": ((parse_identity_operation, identity_create(version="1")), "version"),
    "type-unknown": ((parse_identity_operation, identity_create(type="rotate")), "type"),
    "keys-not-array": ((parse_identity_operation, identity_create(authKeys={})), "array"),
    "created-at-bad": ((parse_identity_operation, identity_create(createdAt="yesterday")), "ISO"),
    "created-at-missing": (
        (parse_identity_operation, identity_create(createdAt=None)),
        "createdAt",
    ),
    "did-257": ((parse_content_operation, content_update(did="d" * 257)), "256"),
    "did-empty": ((parse_content_operation, content_update(did="")), "empty"),
    "previous-257": (
        (parse_content_operation, content_update(previousOperationCID="c" * 257)),
        "256",
    ),
    "document-257": ((parse_content_operation, content_update(documentCID="c" * 257)), "256"),
    "base-document-257": (
        (parse_content_operation, content_update(baseDocumentCID="c" * 257)),
        "256",
    ),
    "note-257": ((parse_content_operation, content_update(note="n" * 257)), "256"),
    "note-129-astral": (
        (parse_content_operation, content_update(note="\U0001f600" * 129)),
        "256",
    ),
    "document-255-and-an-astral": (
        (parse_content_operation, content_update(documentCID="c" * 255 + "\U0001f600")),
        "256",
    ),
    "key-id-33-astral": (
        (parse_identity_operation, identity_create(authKeys=[_key("\U0001f600" * 33)])),
        "64 characters",
    ),
    "note-missing": (
        (parse_content_operation, {k: v for k, v in content_update().items() if k != "note"}),
        "note is required",
    ),
    "note-number": ((parse_content_operation, content_update(note=5)), "note"),
    "create-document-null": (
        (
            parse_content_operation,
            {**content_create_payload(CREATOR_DID, CID, TS), "documentCID": None},
        ),
        "documentCID",
    ),
    "authorization-null": (
        (parse_content_operation, content_update(authorization=None)),
        "authorization",
    ),
    "authorization-number": (
        (parse_content_operation, content_update(authorization=1)),
        "authorization",
    ),
    "beacon-root-uppercase": (
        (
            parse_beacon,
            {
                "version": 1,
                "type": "beacon",
                "did": CREATOR_DID,
                "merkleRoot": ROOT.upper(),
                "createdAt": TS,
            },
        ),
        "merkleRoot",
    ),
    "beacon-root-short": (
        (
            parse_beacon,
            {
                "version": 1,
                "type": "beacon",
                "did": CREATOR_DID,
                "merkleRoot": ROOT[:-1],
                "createdAt": TS,
            },
        ),
        "merkleRoot",
    ),
    "artifact-no-schema": (
        (
            parse_artifact,
            {"version": 1, "type": "artifact", "did": CREATOR_DID, "content": {}, "createdAt": TS},
        ),
        "schema",
    ),
    "artifact-content-not-object": (
        (
            parse_artifact,
            {"version": 1, "type": "artifact", "did": CREATOR_DID, "content": "x", "createdAt": TS},
        ),
        "content",
    ),
    "countersign-target-257": (
        (
            parse_countersign,
            {
                "version": 1,
                "type": "countersign",
                "did": CREATOR_DID,
                "targetCID": "c" * 257,
                "createdAt": TS,
            },
        ),
        "256",
    ),
    "countersign-wrong-type": (
        (
            parse_countersign,
            {"version": 1, "type": "beacon", "did": CREATOR_DID, "targetCID": CID, "createdAt": TS},
        ),
        "countersign",
    ),
}


@pytest.mark.parametrize("case", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_within_limits_is_accepted(case: ParseCase) -> None:
    parse, payload = case
    parse(payload)


@pytest.mark.parametrize(("case", "message"), list(REJECTED.values()), ids=list(REJECTED))
def test_schema_violations_are_malformed(case: ParseCase, message: str) -> None:
    parse, payload = case
    with pytest.raises(MalformedError, match=message):
        parse(payload)


def test_parsed_identity_create() -> None:
    op = parse_identity_operation(identity_create())
    assert op.type == "create" and op.previous_cid is None
    assert op.controller_keys == (MultikeyPublicKey(K1.key_id, "Multikey", K1.multikey),)
    assert op.controller_keys[0].public_key == K1.public_key
    assert op.created_at_ms == 1772841600000


def test_parsed_identity_delete_has_no_keys() -> None:
    op = parse_identity_operation(identity_delete_payload(CID, TS))
    assert op.type == "delete" and op.previous_cid == CID
    assert op.auth_keys == op.assert_keys == op.controller_keys == ()


def test_parsed_content_operations() -> None:
    create = parse_content_operation(content_create_payload(CREATOR_DID, CID, TS))
    assert (create.document_cid, create.base_document_cid, create.note) == (CID, None, None)
    update = parse_content_operation(content_update(documentCID=None, authorization="tok"))
    assert update.document_cid is None and update.authorization == "tok"
    delete = parse_content_operation(content_delete_payload(CREATOR_DID, CID, TS, note="bye"))
    assert delete.document_cid is None and delete.note == "bye"


def test_parsed_standalone_payloads() -> None:
    beacon = parse_beacon(
        {"version": 1, "type": "beacon", "did": CREATOR_DID, "merkleRoot": ROOT, "createdAt": TS}
    )
    assert beacon.merkle_root == ROOT
    content = {"$schema": "https://schemas.dfos.com/profile/v1", "name": "x"}
    artifact = parse_artifact(
        {"version": 1, "type": "artifact", "did": CREATOR_DID, "content": content, "createdAt": TS}
    )
    assert artifact.schema == "https://schemas.dfos.com/profile/v1"
    countersign = parse_countersign(
        {"version": 1, "type": "countersign", "did": CREATOR_DID, "targetCID": CID, "createdAt": TS}
    )
    assert countersign.target_cid == CID
