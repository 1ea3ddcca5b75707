"""Builders emit payloads with the reference field order, so signing them
reproduces the vector tokens exactly."""

from __future__ import annotations

import pytest

from relay.protocol import (
    TYP_BEACON,
    TYP_CONTENT,
    TYP_IDENTITY,
    beacon_payload,
    content_create_payload,
    content_delete_payload,
    content_update_payload,
    decode_jws,
    identity_create_payload,
    identity_delete_payload,
    identity_update_payload,
    sign_operation,
)

from .conftest import CREATOR_DID, DELEGATE_DID, ref_key, vector

K1, K2, K3 = ref_key(1), ref_key(2), ref_key(3)
GENESIS = "bafyreibanjpgcqffcfhr4sptzjfthh5szohhbo5tjfulemkw7uhden5uqy"
CREATE = "bafyreiaedhjq64aajpwociahl5w37j6uoxr5mojoq5dnah6fpvxr5d4lxu"
DOC1 = "bafyreihzwuoupfg3dxip6xmgzmxsywyii2jeoxxzbgx3zxm2in7knoi3g4"
DOC2 = "bafyreidh7e36cvwy3uw5ypitcqk7uoktbkkkj7e6hxhky4o75rxn7kxilu"
D_CREATE = "bafyreiafxodkotg2ida5xpcedv37k2kjd7jnbyghajhnouobojiaxxj5xi"
D_DOC1 = "bafyreign7gfuu54wo2geg3tf5tepeplblktahjfzqjpujizc7a2boeycca"
D_DOC2 = "bafyreifniynd6hev646uoajac3egak7p2qfhrhho4mfmppa3rtcjpetgde"
KID1, KID2 = f"{CREATOR_DID}#{K1.key_id}", f"{CREATOR_DID}#{K2.key_id}"
ROOT = "7e80d4780f454e0fca0b090d8c646f572b49354f54154531606105aad2fda28e"

CASES = [
    pytest.param(
        "identity-genesis",
        0,
        TYP_IDENTITY,
        identity_create_payload([K1], [K1], [K1], "2026-03-07T00:00:00.000Z"),
        K1,
        K1.key_id,
        id="identity-create",
    ),
    pytest.param(
        "identity-rotation",
        1,
        TYP_IDENTITY,
        identity_update_payload(GENESIS, [K2], [K2], [K2], "2026-03-07T00:01:00.000Z"),
        K1,
        KID1,
        id="identity-update",
    ),
    pytest.param(
        "identity-delete",
        1,
        TYP_IDENTITY,
        identity_delete_payload(GENESIS, "2026-03-07T00:01:00.000Z"),
        K1,
        KID1,
        id="identity-delete",
    ),
    pytest.param(
        "content-lifecycle",
        0,
        TYP_CONTENT,
        content_create_payload(CREATOR_DID, DOC1, "2026-03-07T00:02:00.000Z"),
        K2,
        KID2,
        id="content-create",
    ),
    pytest.param(
        "content-lifecycle",
        1,
        TYP_CONTENT,
        content_update_payload(
            CREATOR_DID, CREATE, DOC2, "2026-03-07T00:03:00.000Z", DOC1, "edited title and body"
        ),
        K2,
        KID2,
        id="content-update",
    ),
    pytest.param(
        "content-delete",
        1,
        TYP_CONTENT,
        content_delete_payload(CREATOR_DID, CREATE, "2026-03-07T00:03:00.000Z", "removing content"),
        K2,
        KID2,
        id="content-delete",
    ),
    pytest.param(
        "content-delegated",
        1,
        TYP_CONTENT,
        content_update_payload(
            DELEGATE_DID,
            D_CREATE,
            D_DOC2,
            "2026-03-07T00:11:00.000Z",
            D_DOC1,
            "delegated edit by key3",
            vector("content-delegated")["authorization"],
        ),
        K3,
        f"{DELEGATE_DID}#{K3.key_id}",
        id="content-delegated-update",
    ),
]


@pytest.mark.parametrize(("name", "index", "typ", "payload", "key", "kid"), CASES)
def test_builder_payload_signs_to_vector_token(
    name: str, index: int, typ: str, payload: dict[str, object], key: object, kid: str
) -> None:
    token = vector(name)["chain"][index]
    assert payload == decode_jws(token).payload
    assert sign_operation(typ, payload, key, kid).token == token  # type: ignore[arg-type]


def test_beacon_builder_signs_to_vector_token() -> None:
    payload = beacon_payload(CREATOR_DID, ROOT, "2026-03-07T00:05:00.000Z")
    assert sign_operation(TYP_BEACON, payload, K1, KID1).token == vector("beacon")["controllerJws"]
    assert sign_operation(TYP_BEACON, payload, K2, KID2).token == vector("beacon")["witnessJws"]
