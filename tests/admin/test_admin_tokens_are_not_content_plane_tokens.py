"""An admin token and a content-plane auth token are different keys. The
admin plane admits only ``aud`` = ``<relay DID>#admin`` (a single string);
a content-plane token (``aud`` = the relay DID, which reader apps, proxies
and logs may see) is refused there with a 401 that says so, on every admin
route and on the operator-only ``GET /peers``. The content plane keeps its
v0.7.1 rule (``aud`` = the relay DID), so it refuses an admin token."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from relay.admin import admin_audience
from relay.config import RelayConfig
from relay.protocol import TYP_JWT, sign_jws
from stores.base import RelayStore

from .conftest import World, open_world

DOCUMENT = {"title": "a document the operator wrote"}


def _admin_calls(world: World) -> list[tuple[str, str, Any]]:
    did = world.alice.did
    return [
        ("GET", "/admin/bans", None),
        ("PUT", f"/admin/bans/{did}", {"reason": "spam", "purge": True}),
        ("DELETE", f"/admin/bans/{did}", None),
        ("POST", "/admin/waiting/drop", {"did": did}),
        ("GET", "/admin/peers", None),
        ("POST", "/admin/peers/sync", {}),
        ("POST", "/admin/peers/reconcile", {"peer": "http://peer.test"}),
        ("POST", "/admin/peers/pause", {"url": "http://peer.test"}),
        ("POST", "/admin/peers/resume", {"url": "http://peer.test"}),
        ("GET", "/admin/log-level", None),
        ("PUT", "/admin/log-level", {"level": "debug"}),
        ("GET", "/admin/ledger", None),
    ]


@pytest.mark.parametrize("index", range(12))
async def test_a_content_plane_token_is_refused_on_every_admin_route(
    world: World, index: int
) -> None:
    method, path, body = _admin_calls(world)[index]
    token = world.content_token()  # the operator's own, valid on the content plane
    response = await world.admin(method, path, body, headers=world.auth(token))
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert "not an admin token" in error and admin_audience(world.relay.did) in error
    refused = world.audits("authenticate")[-1]
    assert refused["outcome"] == "refused" and refused["admin"] == world.operator.did
    assert (await world.admin("GET", "/admin/bans")).json() == {"bans": [], "cursor": None}


def _token_for(world: World, aud: list[str]) -> str:
    """The operator's auth token with an ``aud`` array (RFC 7519 allows one)."""
    op, now = world.operator, world.clock() // 1000
    claims = {"iss": op.did, "sub": op.did, "aud": aud, "exp": now + 60, "iat": now - 5}
    return sign_jws({"alg": "EdDSA", "typ": TYP_JWT, "kid": op.kid}, claims, op.keypair)


async def test_an_audience_array_is_refused_even_naming_the_admin_plane(world: World) -> None:
    admin = admin_audience(world.relay.did)
    both = await world.admin(
        "GET", "/admin/bans", headers=world.auth(_token_for(world, [world.relay.did, admin]))
    )
    assert both.status_code == 401, both.text
    assert "not an admin token" in both.json()["error"]  # it is a content-plane token
    alone = await world.admin("GET", "/admin/bans", headers=world.auth(_token_for(world, [admin])))
    assert alone.status_code == 401, alone.text
    assert "must be the string" in alone.json()["error"]


async def test_another_relays_admin_audience_is_refused(world: World) -> None:
    token = world.token(aud=admin_audience("did:dfos:someotherrelay00000"))
    response = await world.admin("GET", "/admin/bans", headers=world.auth(token))
    assert response.status_code == 401, response.text


async def test_an_admin_token_is_admitted(world: World) -> None:
    response = await world.admin("PUT", f"/admin/bans/{world.alice.did}", {"reason": "spam"})
    assert response.status_code == 200, response.text
    assert response.json()["did"] == world.alice.did


# -- the content plane -------------------------------------------------------------


@pytest.fixture
async def plane(
    store: RelayStore, audit_lines: list[dict[str, Any]]
) -> AsyncIterator[tuple[World, str, str]]:
    """A world whose operator created a content chain: (world, contentId, genesis CID)."""
    async with open_world(
        store, "in-process", audit_lines, replace(RelayConfig(), content=True)
    ) as w:
        handle = w.builder.content_create(w.operator, DOCUMENT)
        assert (await w.post([w.builder.tokens[-1]]))[0]["status"] == "new"
        yield w, handle.content_id, handle.genesis_cid


async def test_an_admin_token_is_refused_by_the_content_plane(
    plane: tuple[World, str, str],
) -> None:
    world, content_id, genesis = plane
    upload = f"/content/{content_id}/blob/{genesis}"
    body = json.dumps(DOCUMENT).encode()
    admin = world.auth(world.token())
    refused = await world.client.put(upload, content=body, headers=admin)
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"] == "invalid auth token: aud does not match this relay"
    assert (await world.client.get(f"/content/{content_id}/blob", headers=admin)).status_code == 401
    # the operator's content-plane token works there as before
    content = world.auth(world.content_token())
    stored = await world.client.put(upload, content=body, headers=content)
    assert stored.status_code == 200, stored.text
    read = await world.client.get(f"/content/{content_id}/blob", headers=content)
    assert read.status_code == 200 and read.content == body
    assert (await world.client.get(f"/content/{content_id}/blob", headers=admin)).status_code == 401


async def test_get_peers_needs_an_admin_token_not_a_content_plane_token(world: World) -> None:
    refused = await world.client.get("/peers", headers=world.auth(world.content_token()))
    assert refused.status_code == 403, refused.text
    assert "not an admin token" in refused.json()["error"]
    assert (await world.client.get("/peers", headers=world.auth())).status_code == 200
