"""Administration is authenticated by DID: a listed operator's auth token,
audience = this relay, short-lived, verified against the operator's
*current* keys as held on this relay. Everyone else is refused (401 or
403), every refusal leaves an audit line, and a token replayed past its
expiry is refused; within its validity it may be presented again."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from relay.config import RelayConfig
from relay.rules.outcomes import Status
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore

from .conftest import World, open_world

ROUTE = "/admin/bans"


def assert_refused(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert isinstance(response.json()["error"], str)
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer"


async def test_an_operator_token_is_admitted(world: World) -> None:
    response = await world.admin("GET", ROUTE)
    assert response.status_code == 200, response.text
    assert response.json() == {"bans": [], "cursor": None}
    line = world.audits("list-bans")[-1]
    assert line["admin"] == world.operator.did and line["outcome"] == "ok"


@pytest.mark.parametrize(
    "header",
    ["", "Bearer", "Basic abc", "Bearer x.y.z", "Bearer not-a-jws"],
    ids=["missing", "empty", "other-scheme", "garbage", "not-a-jws"],
)
async def test_no_valid_token_is_401(world: World, header: str) -> None:
    headers = {"Authorization": header} if header else {"X-None": "1"}
    assert_refused(await world.client.get(ROUTE, headers=headers), 401)
    assert world.audits("authenticate")[-1]["outcome"] == "refused"


async def test_a_valid_token_of_a_non_operator_is_403(world: World) -> None:
    assert_refused(
        await world.admin("GET", ROUTE, headers=world.auth(world.token(world.alice))), 403
    )
    refused = world.audits("authenticate")[-1]
    assert refused["admin"] == world.alice.did and "not an operator" in refused["error"]


async def test_wrong_audience_is_401(world: World) -> None:
    for aud in ("did:dfos:someotherrelay00000", "http://relay.test"):
        token = world.token(aud=aud)
        assert_refused(await world.admin("GET", ROUTE, headers=world.auth(token)), 401)


@pytest.mark.parametrize(
    ("iat_offset", "lifetime"),
    [(-600, 60), (-60, 60), (120, 60), (-5, 3600)],
    ids=["expired", "expires-now", "issued-in-the-future", "lifetime-over-the-maximum"],
)
async def test_tokens_outside_their_validity_are_401(
    world: World, iat_offset: int, lifetime: int
) -> None:
    token = world.token(iat=world.clock() // 1000 + iat_offset, lifetime=lifetime)
    assert_refused(await world.admin("GET", ROUTE, headers=world.auth(token)), 401)


async def test_reuse_within_validity_is_allowed_and_a_replay_past_expiry_refused(
    world: World,
) -> None:
    token = world.token(lifetime=60)
    for _ in range(2):  # bearer semantics within the validity window
        assert (await world.admin("GET", ROUTE, headers=world.auth(token))).status_code == 200
    ids = {line["token_id"] for line in world.audits("list-bans")}
    assert len(ids) == 1  # the audit trail shows the reuse
    world.clock.advance(61)
    assert_refused(await world.admin("GET", ROUTE, headers=world.auth(token)), 401)
    assert "expired" in world.audits("authenticate")[-1]["error"]


async def test_a_rotated_out_key_is_refused_at_once(world: World) -> None:
    old_key = world.operator.keypair
    old_token = world.token(keypair=old_key)
    assert (await world.admin("GET", ROUTE, headers=world.auth(old_token))).status_code == 200
    before = len(world.builder.tokens)
    world.builder.rotate(world.operator)
    results = await world.relay.ingest(world.builder.tokens[before:])
    assert [r.status for r in results] == [Status.NEW]
    assert_refused(await world.admin("GET", ROUTE, headers=world.auth(old_token)), 401)
    assert_refused(
        await world.admin("GET", ROUTE, headers=world.auth(world.token(keypair=old_key))), 401
    )
    assert (await world.admin("GET", ROUTE)).status_code == 200  # the current key


async def test_a_deleted_operator_identity_is_refused(world: World) -> None:
    before = len(world.builder.tokens)
    world.builder.delete_identity(world.operator)
    assert [r.status for r in await world.relay.ingest(world.builder.tokens[before:])] == [
        Status.NEW
    ]
    assert_refused(await world.admin("GET", ROUTE), 401)


async def test_an_operator_whose_identity_this_relay_does_not_hold_is_refused(
    store: RelayStore, audit_lines: list[dict[str, Any]]
) -> None:
    stranger = WorkloadBuilder(seed=99).identity()  # never ingested
    async with open_world(store, "in-process", audit_lines) as w:
        w.relay.config = RelayConfig(admin_dids=(stranger.did,))
        response = await w.admin("GET", ROUTE, headers=w.auth(w.token(stranger)))
        assert_refused(response, 401)
        assert "unknown to this relay" in response.json()["error"]


async def test_without_operators_administration_answers_501(
    store: RelayStore, audit_lines: list[dict[str, Any]]
) -> None:
    async with open_world(store, "in-process", audit_lines) as w:
        w.relay.config = RelayConfig()
        response = await w.admin("GET", ROUTE)
        assert response.status_code == 501 and "--admin-did" in response.json()["error"]
