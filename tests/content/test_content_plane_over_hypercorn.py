"""The content plane over real HTTP: hypercorn on loopback, httpx over TCP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from relay import create_relay
from relay.config import RelayConfig
from relay.protocol import cid_of
from relay.testing.server import serve_on_loopback
from stores.base import RelayStore

from .conftest import CONTENT_PLANE_LIMIT_BYTES, World, doc_bytes, start_world


@pytest.fixture
async def served(store: RelayStore) -> AsyncIterator[World]:
    relay = create_relay(store, config=RelayConfig(max_blob_bytes=CONTENT_PLANE_LIMIT_BYTES))
    async with (
        serve_on_loopback(relay.app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield await start_world(relay, client)


async def test_upload_then_read_as_creator_and_reader(served: World) -> None:
    w = served
    pretty = doc_bytes(w.docs[w.bob_update], pretty=True)
    stored = await w.upload(w.bob, w.bob_update, pretty)  # delegated upload
    assert stored.status_code == 200
    assert stored.json()["documentCID"] == cid_of(w.docs[w.bob_update])
    for actor, credential in ((w.alice, None), (w.carol, w.credential(w.alice, w.carol))):
        response = await w.download(actor, w.bob_update, credential)
        assert response.status_code == 200
        assert response.content == pretty  # byte for byte, not re-serialised
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.headers["x-document-cid"] == cid_of(w.docs[w.bob_update])


async def test_refusals_are_json(served: World) -> None:
    w = served
    checks = [
        (await w.client.get(f"/content/{w.chain.content_id}/blob/{w.genesis}"), 401),
        (await w.download(w.carol, w.genesis), 403),
        (await w.download(w.alice, w.genesis), 404),
        (await w.upload(w.alice, w.genesis, b"{not json"), 400),
        (await w.upload(w.alice, w.genesis, b"[" * (CONTENT_PLANE_LIMIT_BYTES + 1)), 413),
    ]
    for response, status in checks:
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/json"
        assert "error" in response.json()


async def test_wrong_audience_and_expired_token_over_http(served: World) -> None:
    w = served
    path = f"/content/{w.chain.content_id}/blob"
    for token in (
        w.token(w.alice, aud="relay.example.com"),
        w.token(w.alice, iat=w.now_s - 900, exp=w.now_s - 1),
    ):
        response = await w.client.get(path, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401


async def test_content_off_over_http(store: RelayStore) -> None:
    relay = create_relay(store, content=False)
    async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.put(f"/content/{'a' * 22}/blob/bafyreiaaaa", content=b"{}")
        assert response.status_code == 501
        assert response.json() == {"error": "the content plane is not enabled on this relay"}
