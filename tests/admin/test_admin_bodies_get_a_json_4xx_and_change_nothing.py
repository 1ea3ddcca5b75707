"""Every admin route answers a body it cannot use with a JSON 4xx and
changes nothing: a string field holding a lone surrogate (JSON's
``"\\ud800"``, which no store can keep and no answer can carry) is a 400
on every route, and a null field reads as an absent one."""

from __future__ import annotations

import pytest

from .conftest import World

LONE = '"a\\ud800b"'  # JSON text of a string holding a lone surrogate


def _routes(world: World) -> list[tuple[str, str, str]]:
    did = world.alice.did
    return [
        ("PUT", f"/admin/bans/{did}", f'{{"reason": {LONE}}}'),
        ("POST", "/admin/waiting/drop", f'{{"did": {LONE}}}'),
        ("POST", "/admin/peers/sync", f'{{"peer": {LONE}}}'),
        ("POST", "/admin/peers/reconcile", f'{{"peer": {LONE}}}'),
        ("POST", "/admin/peers/pause", f'{{"url": {LONE}}}'),
        ("POST", "/admin/peers/resume", f'{{"url": {LONE}}}'),
        ("PUT", "/admin/log-level", f'{{"level": {LONE}}}'),
        ("PUT", "/admin/log-level", f'{{"level": "info", "logger": {LONE}}}'),
    ]


@pytest.mark.parametrize("index", range(8))
async def test_a_lone_surrogate_in_a_string_field_is_a_400(world: World, index: int) -> None:
    method, path, body = _routes(world)[index]
    headers = {**world.auth(), "Content-Type": "application/json"}
    response = await world.client.request(method, path, content=body.encode(), headers=headers)
    assert response.status_code == 400, response.text
    assert "surrogate" in response.json()["error"]
    assert (await world.admin("GET", "/admin/bans")).json() == {"bans": [], "cursor": None}
    # the store still takes writes (a failed write must not leave it mid-transaction)
    assert (await world.post([world.beacon(world.bob)]))[0]["status"] == "new"


async def test_a_null_field_reads_as_an_absent_one(world: World) -> None:
    body = {"reason": None, "purge": None}
    response = await world.admin("PUT", f"/admin/bans/{world.alice.did}", body)
    assert response.status_code == 200, response.text
    assert response.json()["reason"] == "" and response.json()["purge"] is None
