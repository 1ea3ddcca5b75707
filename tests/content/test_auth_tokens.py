"""Auth tokens on the content plane (PROTOCOL.md "Auth Tokens"; WEB-RELAY.md
"Key Resolution"): aud must be this relay's DID, iat <= now < exp, lifetime
within the relay's maximum, signed by a key in the identity's *current* state
of a live identity. Every failure is 401 with a JSON body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from relay import create_relay
from relay.config import RelayConfig
from relay.protocol import Ed25519Keypair
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client

from .conftest import World, ingest_more, start_world


async def _get(world: World, headers: dict[str, str]) -> httpx.Response:
    return await world.client.get(
        f"/content/{world.chain.content_id}/blob/{world.genesis}", headers=headers
    )


async def _with_token(world: World, token: str) -> httpx.Response:
    return await _get(world, {"Authorization": f"Bearer {token}"})


def _assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert isinstance(response.json()["error"], str)
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.fixture
async def uploaded(world: World) -> World:
    assert (await world.upload(world.alice, world.genesis)).status_code == 200
    return world


async def test_valid_token_authenticates(uploaded: World) -> None:
    assert (await _with_token(uploaded, uploaded.token(uploaded.alice))).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer x.y.z"},
    ],
    ids=["missing", "empty-bearer", "other-scheme", "garbage"],
)
async def test_missing_or_malformed_authorization_is_401(
    uploaded: World, headers: dict[str, str]
) -> None:
    _assert_401(await _get(uploaded, headers))


async def test_scheme_is_case_insensitive(uploaded: World) -> None:
    token = uploaded.token(uploaded.alice)
    assert (await _get(uploaded, {"Authorization": f"bearer {token}"})).status_code == 200


async def test_two_authorization_headers_are_a_401_whatever_their_order(
    uploaded: World,
) -> None:
    """Which one a proxy in front checked is unknown: the request is
    refused, not admitted on whichever the relay reads first."""
    valid = f"Bearer {uploaded.token(uploaded.alice)}"
    for pair in ((valid, "Bearer x"), ("Bearer x", valid), (valid, valid)):
        response = await uploaded.client.get(
            f"/content/{uploaded.chain.content_id}/blob/{uploaded.genesis}",
            headers=[("Authorization", value) for value in pair],
        )
        _assert_401(response)
        assert response.json()["error"] == "one Authorization header is allowed"


async def test_token_for_another_audience_is_401(uploaded: World) -> None:
    w = uploaded
    for aud in ("did:dfos:someotherrelay", "relay.test"):
        _assert_401(await _with_token(w, w.token(w.alice, aud=aud)))


@pytest.mark.parametrize(
    ("iat_offset", "exp_offset"),
    [(-600, -60), (-600, 0), (120, 400)],
    ids=["expired", "expires-now", "issued-in-the-future"],
)
async def test_token_outside_its_validity_window_is_401(
    uploaded: World, iat_offset: int, exp_offset: int
) -> None:
    w = uploaded
    token = w.token(w.alice, iat=w.now_s + iat_offset, exp=w.now_s + exp_offset)
    _assert_401(await _with_token(w, token))


async def test_token_lifetime_over_the_relay_maximum_is_401(uploaded: World) -> None:
    w = uploaded
    limit = w.relay.config.auth_token_max_lifetime_s
    too_long = w.token(w.alice, iat=w.now_s - 10, exp=w.now_s - 10 + limit + 1)
    _assert_401(await _with_token(w, too_long))
    at_limit = w.token(w.alice, iat=w.now_s - 10, exp=w.now_s - 10 + limit)
    assert (await _with_token(w, at_limit)).status_code == 200


@asynccontextmanager
async def _world_with_max_lifetime(store: RelayStore, seconds: int) -> AsyncIterator[World]:
    relay = create_relay(store, config=RelayConfig(auth_token_max_lifetime_s=seconds))
    async with relay.running(), asgi_client(relay.app) as client:
        yield await start_world(relay, client)


async def test_max_lifetime_is_configurable(store: RelayStore) -> None:
    async with _world_with_max_lifetime(store, 60) as w:
        assert (await w.upload(w.alice, w.genesis)).status_code == 401  # 300 s > 60 s
        token = w.token(w.alice, iat=w.now_s - 1, exp=w.now_s + 59)
        _assert_401(await _with_token(w, w.token(w.alice)))
        assert (await _with_token(w, token)).status_code == 404  # authenticated; no blob


async def test_a_lifetime_bound_of_0_leaves_the_specs_checks_only(store: RelayStore) -> None:
    async with _world_with_max_lifetime(store, 0) as w:
        year = w.token(w.alice, iat=w.now_s - 1, exp=w.now_s + 365 * 86_400)
        assert (await _with_token(w, year)).status_code == 404  # authenticated; no blob
        expired = w.token(w.alice, iat=w.now_s - 100, exp=w.now_s - 1)
        _assert_401(await _with_token(w, expired))


async def test_credential_presented_as_auth_token_is_401(uploaded: World) -> None:
    w = uploaded
    _assert_401(await _with_token(w, w.credential(w.alice, w.alice)))


async def test_unknown_identity_is_401(uploaded: World) -> None:
    w = uploaded
    stranger = w.builder.identity()  # signed but never ingested
    _assert_401(await _with_token(w, w.token(stranger)))


async def test_key_not_in_the_identity_is_401(uploaded: World) -> None:
    w = uploaded
    forged = w.token(w.alice, keypair=Ed25519Keypair.from_seed(b"\x01" * 32))
    _assert_401(await _with_token(w, forged))


async def test_kid_of_another_identity_is_401(uploaded: World) -> None:
    w = uploaded
    from relay.protocol import create_auth_token

    kp = w.mallory.keypair
    token = create_auth_token(
        kp, f"{w.mallory.did}#{kp.key_id}", w.alice.did, w.relay.did, w.now_s - 1, w.now_s + 60
    )
    _assert_401(await _with_token(w, token))


async def test_rotated_out_key_stops_authenticating_at_once(uploaded: World) -> None:
    w = uploaded
    old_key = w.alice.keypair
    old_token = w.token(w.alice)
    assert (await _with_token(w, old_token)).status_code == 200
    since = len(w.builder.tokens)
    w.builder.rotate(w.alice)
    await ingest_more(w, since)
    _assert_401(await _with_token(w, old_token))
    _assert_401(await _with_token(w, w.token(w.alice, keypair=old_key)))
    assert (await _with_token(w, w.token(w.alice))).status_code == 200


async def test_deleted_identity_cannot_authenticate(uploaded: World) -> None:
    w = uploaded
    since = len(w.builder.tokens)
    w.builder.delete_identity(w.alice)
    await ingest_more(w, since)
    response = await _with_token(w, w.token(w.alice))
    _assert_401(response)
    assert "deleted" in response.json()["error"]


async def test_authentication_precedes_existence_checks(uploaded: World) -> None:
    w = uploaded
    response = await w.client.get(f"/content/{'a' * 22}/blob")
    _assert_401(response)
