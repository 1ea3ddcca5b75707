"""The content plane against the upstream reference vectors: the reference
identity (identity-genesis / -rotation / -delete), the delegated content chain
(content-delegated) and the read and write credentials between the reference
creator and delegate (credential-read, credential-write).

The delegate's identity chain is not among the vectors; it is derivable: a
genesis with reference key 3 in every role at 2026-03-07T00:09:00.000Z has
exactly the DID the vectors use. The credentials carry fixed iat/exp, so the
relay's clock is injected inside (or outside) that window.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay import Relay, create_relay
from relay.protocol import (
    TYP_IDENTITY,
    Ed25519Keypair,
    cid_of,
    create_auth_token,
    reference_keypair,
    sign_operation,
)
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client

from .conftest import assert_all_new

VECTORS = Path(__file__).resolve().parents[3] / "shared" / "reference" / "vectors"
CREATOR_DID = "did:dfos:e3vvtck42d4eacdnzvtrn6"
DELEGATE_DID = "did:dfos:nzkf838efr424433rn2rzk"
CREDENTIAL_IAT_S, CREDENTIAL_EXP_S = 1772841600, 1798761600
INSIDE_WINDOW_MS = (CREDENTIAL_IAT_S + 3600) * 1000


def vector(name: str) -> dict[str, Any]:
    return json.loads((VECTORS / name).read_text())  # type: ignore[no-any-return]


def delegate_genesis() -> str:
    kp = reference_keypair(3)
    key = {"id": kp.key_id, "type": "Multikey", "publicKeyMultibase": kp.multikey}
    payload = {
        "version": 1,
        "type": "create",
        "authKeys": [key],
        "assertKeys": [key],
        "controllerKeys": [key],
        "createdAt": "2026-03-07T00:09:00.000Z",
    }
    return sign_operation(TYP_IDENTITY, payload, kp, kp.key_id).token


class VectorRelay:
    def __init__(self, relay: Relay, client: httpx.AsyncClient) -> None:
        self.relay, self.client = relay, client
        delegated = vector("content-delegated.json")
        self.content_id: str = delegated["expected"]["contentId"]
        # the committed document is the flat content object (PROTOCOL.md)
        self.documents: list[dict[str, Any]] = [d["content"] for d in delegated["documents"]]
        self.genesis_cid = self.delegated_cid = ""
        self.chain_tokens: list[str] = delegated["chain"]

    def token(self, did: str, kp: Ed25519Keypair) -> str:
        now_s = self.relay.clock() // 1000
        return create_auth_token(
            kp, f"{did}#{kp.key_id}", did, self.relay.did, now_s - 5, now_s + 60
        )

    async def get(
        self, did: str, kp: Ed25519Keypair, credential: str | None = None
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token(did, kp)}"}
        if credential is not None:
            headers["X-Credential"] = credential
        return await self.client.get(f"/content/{self.content_id}/blob", headers=headers)

    async def put(
        self, did: str, kp: Ed25519Keypair, op_cid: str, document: dict[str, Any]
    ) -> httpx.Response:
        return await self.client.put(
            f"/content/{self.content_id}/blob/{op_cid}",
            content=json.dumps(document).encode(),
            headers={"Authorization": f"Bearer {self.token(did, kp)}"},
        )


VectorRelayFactory = Callable[[int], AbstractAsyncContextManager[VectorRelay]]


@pytest.fixture
def vector_relay(store: RelayStore) -> VectorRelayFactory:
    @asynccontextmanager
    async def start(clock_ms: int) -> AsyncIterator[VectorRelay]:
        relay = create_relay(store, clock=lambda: clock_ms)
        async with relay.running(), asgi_client(relay.app) as client:
            v = VectorRelay(relay, client)
            genesis = vector("identity-genesis.json")["chain"]
            results = await relay.ingest([*genesis, delegate_genesis(), *v.chain_tokens])
            assert_all_new(results)
            v.genesis_cid, v.delegated_cid = results[-2].cid, results[-1].cid
            yield v

    return start


KEY_1, KEY_2, KEY_3 = reference_keypair(1), reference_keypair(2), reference_keypair(3)
READ = vector("credential-read.json")["credential"]
WRITE = vector("credential-write.json")


def test_delegate_identity_is_derivable_from_reference_key_3() -> None:
    from relay.protocol import decode_jws, did_from_genesis_cid

    assert did_from_genesis_cid(decode_jws(delegate_genesis()).header["cid"]) == DELEGATE_DID  # type: ignore[arg-type]


def test_vector_documents_are_the_committed_documents() -> None:
    from relay.protocol import decode_jws

    delegated = vector("content-delegated.json")
    for token, document in zip(delegated["chain"], delegated["documents"], strict=True):
        assert decode_jws(token).payload["documentCID"] == cid_of(document["content"])


async def test_creator_and_delegate_upload_and_the_reader_reads(
    vector_relay: VectorRelayFactory,
) -> None:
    async with vector_relay(INSIDE_WINDOW_MS) as v:
        assert (await v.put(CREATOR_DID, KEY_1, v.genesis_cid, v.documents[0])).status_code == 200
        assert (
            await v.put(DELEGATE_DID, KEY_3, v.delegated_cid, v.documents[1])
        ).status_code == 200
        # the delegate signed only the update; the genesis document is the creator's to upload
        assert (await v.put(DELEGATE_DID, KEY_3, v.genesis_cid, v.documents[0])).status_code == 403
        assert (await v.get(CREATOR_DID, KEY_1)).json() == v.documents[1]
        response = await v.get(DELEGATE_DID, KEY_3, READ)
        assert response.status_code == 200
        assert (
            response.headers["x-document-cid"]
            == vector("content-delegated.json")["expected"]["currentDocumentCID"]
        )


@pytest.mark.parametrize(
    "credential",
    [
        None,
        WRITE["broadCredential"],
        WRITE["narrowCredential"],
        vector("content-delegated.json")["authorization"],
    ],
    ids=["none", "write-broad", "write-narrowed-elsewhere", "write-narrowed-here"],
)
async def test_write_credentials_never_grant_reading(
    vector_relay: VectorRelayFactory, credential: str | None
) -> None:
    async with vector_relay(INSIDE_WINDOW_MS) as v:
        assert (
            await v.put(DELEGATE_DID, KEY_3, v.delegated_cid, v.documents[1])
        ).status_code == 200
        assert (await v.get(DELEGATE_DID, KEY_3, credential)).status_code == 403


@pytest.mark.parametrize(
    ("clock_ms", "status"),
    [
        ((CREDENTIAL_IAT_S - 60) * 1000, 403),
        (INSIDE_WINDOW_MS, 200),
        ((CREDENTIAL_EXP_S - 1) * 1000, 200),
        (CREDENTIAL_EXP_S * 1000, 403),
    ],
    ids=["before-iat", "inside", "last-second", "at-exp"],
)
async def test_read_credential_honours_its_window_by_the_relay_clock(
    vector_relay: VectorRelayFactory, clock_ms: int, status: int
) -> None:
    async with vector_relay(clock_ms) as v:
        assert (
            await v.put(DELEGATE_DID, KEY_3, v.delegated_cid, v.documents[1])
        ).status_code == 200
        assert (await v.get(DELEGATE_DID, KEY_3, READ)).status_code == status


async def test_rotation_retires_the_genesis_key_at_once(vector_relay: VectorRelayFactory) -> None:
    async with vector_relay(INSIDE_WINDOW_MS) as v:
        assert (await v.put(CREATOR_DID, KEY_1, v.delegated_cid, v.documents[1])).status_code == 200
        assert (await v.get(DELEGATE_DID, KEY_3, READ)).status_code == 200
        rotation = vector("identity-rotation.json")["chain"][1]
        assert_all_new(await v.relay.ingest([rotation]))
        assert (await v.get(CREATOR_DID, KEY_1)).status_code == 401
        assert (await v.get(CREATOR_DID, KEY_2)).status_code == 200
        # the read credential was signed by the rotated-out key 1
        assert (await v.get(DELEGATE_DID, KEY_3, READ)).status_code == 403


async def test_deleting_the_creator_revokes_everything(vector_relay: VectorRelayFactory) -> None:
    async with vector_relay(INSIDE_WINDOW_MS) as v:
        assert (await v.put(CREATOR_DID, KEY_1, v.genesis_cid, v.documents[0])).status_code == 200
        deletion = vector("identity-delete.json")["chain"][1]
        assert_all_new(await v.relay.ingest([deletion]))
        assert (await v.get(CREATOR_DID, KEY_1)).status_code == 401
        assert (await v.get(DELEGATE_DID, KEY_3, READ)).status_code == 403
        assert (
            await v.put(DELEGATE_DID, KEY_3, v.delegated_cid, v.documents[1])
        ).status_code == 403
