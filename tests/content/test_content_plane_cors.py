"""The content plane from a browser app on an allowed origin (CORS, additive):
a reader must be able to send its DFOSContentRead credential (X-Credential)
and read which document it got (X-Document-CID)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay import Relay, create_relay
from relay.config import RelayConfig
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client

from .conftest import World, start_world

APP = "https://app.example"


@pytest.fixture
async def cors_world(store: RelayStore) -> AsyncIterator[World]:
    relay: Relay = create_relay(store, config=RelayConfig(cors_origins=(APP,)))
    async with relay.running(), asgi_client(relay.app) as client:
        yield await start_world(relay, client)


async def test_preflight_allows_the_read_credential_header(cors_world: World) -> None:
    w = cors_world
    answer = await w.client.options(
        f"/content/{w.chain.content_id}/blob/{w.genesis}",
        headers={
            "origin": APP,
            "access-control-request-method": "GET",
            "access-control-request-headers": "authorization, x-credential",
        },
    )
    assert answer.status_code == 200, answer.text
    assert "x-credential" in answer.headers["access-control-allow-headers"].lower()


async def test_reader_on_an_allowed_origin_sees_the_document_cid(cors_world: World) -> None:
    w = cors_world
    assert (await w.upload(w.alice, w.genesis)).status_code == 200
    response = await w.client.get(
        f"/content/{w.chain.content_id}/blob/{w.genesis}",
        headers={**w.headers(w.carol, w.credential(w.alice, w.carol)), "origin": APP},
    )
    assert response.status_code == 200
    exposed = response.headers["access-control-expose-headers"].lower()
    assert "x-document-cid" in exposed
