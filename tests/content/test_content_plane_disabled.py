"""With ``content: false`` every content-plane route answers 501 JSON - not
404 - before any authentication (WEB-RELAY.md "Content Plane (private)")."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay import Relay, create_relay
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client

from .conftest import World, doc_bytes, start_world


@pytest.fixture
async def world_without_content(store: RelayStore) -> AsyncIterator[World]:
    relay: Relay = create_relay(store, content=False)
    async with relay.running(), asgi_client(relay.app) as client:
        yield await start_world(relay, client)


async def test_well_known_reports_content_off(world_without_content: World) -> None:
    body = (await world_without_content.client.get("/.well-known/dfos-relay")).json()
    assert body["content"] is False


async def test_every_content_route_is_501(world_without_content: World) -> None:
    w = world_without_content
    base = f"/content/{w.chain.content_id}/blob"
    requests = [
        ("GET", base),
        ("GET", f"{base}/head"),
        ("GET", f"{base}/{w.genesis}"),
        ("PUT", f"{base}/{w.genesis}"),
    ]
    for method, path in requests:
        for headers in ({}, w.headers(w.alice)):
            response = await w.client.request(
                method, path, headers=headers, content=doc_bytes(w.docs[w.genesis])
            )
            assert response.status_code == 501, (method, path)
            assert "not enabled" in response.json()["error"]


async def test_unknown_chain_is_also_501(world_without_content: World) -> None:
    response = await world_without_content.client.get(f"/content/{'a' * 22}/blob")
    assert response.status_code == 501


async def test_proof_plane_still_serves_the_chain(world_without_content: World) -> None:
    w = world_without_content
    response = await w.client.get(f"/content/{w.chain.content_id}")
    assert response.status_code == 200
