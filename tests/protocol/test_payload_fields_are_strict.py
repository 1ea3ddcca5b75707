"""Payloads carry their kind's fields and no others (PROTOCOL.md "Operation
Schemas"; the reference schemas are ``z.strictObject``): an extra field, in a
payload or a key entry, makes an op that v0.7.1 relays reject, so a relay that
took it would hold a chain its peers never converge to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relay.protocol import (
    TYP_IDENTITY,
    MalformedError,
    content_create_payload,
    content_delete_payload,
    content_update_payload,
    decode_jws,
    identity_create_payload,
    identity_delete_payload,
    identity_update_payload,
    parse_artifact,
    parse_beacon,
    parse_content_operation,
    parse_countersign,
    parse_identity_operation,
    sign_operation,
    verify_identity_genesis,
)
from relay.protocol.builders import artifact_payload, beacon_payload, countersign_payload

from .conftest import CREATOR_DID, NOW_MS, ref_key

TS = "2026-03-07T00:00:00.000Z"
CID = "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa"
ROOT = "7e80d4780f454e0fca0b090d8c646f572b49354f54154531606105aad2fda28e"
K1 = ref_key(1)

Case = tuple[Callable[[dict[str, Any]], object], dict[str, Any]]

KINDS: dict[str, Case] = {
    "identity-create": (parse_identity_operation, identity_create_payload([K1], [K1], [K1], TS)),
    "identity-update": (
        parse_identity_operation,
        identity_update_payload(CID, [K1], [K1], [K1], TS),
    ),
    "identity-delete": (parse_identity_operation, identity_delete_payload(CID, TS)),
    "content-create": (parse_content_operation, content_create_payload(CREATOR_DID, CID, TS)),
    "content-update": (
        parse_content_operation,
        content_update_payload(CREATOR_DID, CID, CID, TS, authorization="vc"),
    ),
    "content-delete": (
        parse_content_operation,
        content_delete_payload(CREATOR_DID, CID, TS, authorization="vc"),
    ),
    "beacon": (parse_beacon, beacon_payload(CREATOR_DID, ROOT, TS)),
    "artifact": (parse_artifact, artifact_payload(CREATOR_DID, {"$schema": "s", "x": 1}, TS)),
    "countersign": (parse_countersign, countersign_payload(CREATOR_DID, CID, TS)),
}


@pytest.mark.parametrize("case", list(KINDS.values()), ids=list(KINDS))
def test_each_kind_with_its_own_fields_parses(case: Case) -> None:
    parse, payload = case
    parse(payload)


@pytest.mark.parametrize("case", list(KINDS.values()), ids=list(KINDS))
def test_an_unknown_field_is_malformed(case: Case) -> None:
    parse, payload = case
    with pytest.raises(MalformedError, match="unknown field extra"):
        parse({**payload, "extra": {"x": 1}})


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            (
                parse_identity_operation,
                {**identity_create_payload([K1], [K1], [K1], TS), "did": CREATOR_DID},
            ),
            id="identity-create-with-did",
        ),
        pytest.param(
            (
                parse_identity_operation,
                {**identity_create_payload([K1], [K1], [K1], TS), "previousOperationCID": None},
            ),
            id="identity-create-with-null-previous",
        ),
        pytest.param(
            (parse_identity_operation, {**identity_delete_payload(CID, TS), "controllerKeys": []}),
            id="identity-delete-with-keys",
        ),
        pytest.param(
            (
                parse_content_operation,
                {**content_create_payload(CREATOR_DID, CID, TS), "authorization": "vc"},
            ),
            id="content-create-with-authorization",
        ),
        pytest.param(
            (
                parse_content_operation,
                {**content_delete_payload(CREATOR_DID, CID, TS), "documentCID": None},
            ),
            id="content-delete-with-document",
        ),
    ],
)
def test_a_field_of_another_type_is_malformed(case: Case) -> None:
    parse, payload = case
    with pytest.raises(MalformedError, match="unknown field"):
        parse(payload)


def test_a_key_entry_with_an_extra_field_is_malformed() -> None:
    payload = identity_create_payload([K1], [K1], [K1], TS)
    payload["authKeys"] = [{**payload["authKeys"][0], "controller": CREATOR_DID}]  # type: ignore[index]
    with pytest.raises(MalformedError, match=r"unknown field authKeys\.controller"):
        parse_identity_operation(payload)


def test_artifact_schema_is_at_most_256_characters() -> None:
    parse_artifact(artifact_payload(CREATOR_DID, {"$schema": "s" * 256}, TS))
    with pytest.raises(MalformedError, match="256"):
        parse_artifact(artifact_payload(CREATOR_DID, {"$schema": "s" * 257}, TS))


def test_signed_genesis_with_an_extra_field_is_rejected() -> None:
    payload = {**identity_create_payload([K1], [K1], [K1], TS), "note": "hi"}
    token = sign_operation(TYP_IDENTITY, payload, K1, K1.key_id).token
    with pytest.raises(MalformedError, match="unknown field note"):
        verify_identity_genesis(decode_jws(token), NOW_MS)
