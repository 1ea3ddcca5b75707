"""An admin body holds only the fields its route takes. Any other field is
a 400 whose JSON error names it (and the fields the route does take), and
the action is not done: ``{"Purge": true}`` neither bans nor purges, where
it used to ban without purging and answer ``"purge": null``."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import World


def _calls(world: World) -> list[tuple[str, str, dict[str, Any], str]]:
    """(method, path, body with one unknown field, that field) per route with a body."""
    did = world.alice.did
    peer = "http://peer.test"
    return [
        ("PUT", f"/admin/bans/{did}", {"reason": "spam", "Purge": True}, "Purge"),
        (
            "POST",
            "/admin/waiting/drop",
            {"did": did, "older_than_seconds": 0},
            "older_than_seconds",
        ),
        ("POST", "/admin/peers/sync", {"peer": peer, "all": True}, "all"),
        ("POST", "/admin/peers/reconcile", {"peer": peer, "scope": "x"}, "scope"),
        ("POST", "/admin/peers/pause", {"url": peer, "directions": "in"}, "directions"),
        ("POST", "/admin/peers/resume", {"url": peer, "dir": "out"}, "dir"),
        ("PUT", "/admin/log-level", {"level": "debug", "Logger": "x"}, "Logger"),
    ]


ROUTES = ["ban", "drop", "sync", "reconcile", "pause", "resume", "log-level"]


async def _state(world: World) -> tuple[Any, ...]:
    bans = (await world.admin("GET", "/admin/bans")).json()
    levels = (await world.admin("GET", "/admin/log-level")).json()
    return bans, levels, await world.relay.store.list_peer_cursors()


@pytest.mark.parametrize("index", range(len(ROUTES)), ids=ROUTES)
async def test_an_unknown_field_is_a_400_naming_it(world: World, index: int) -> None:
    method, path, body, unknown = _calls(world)[index]
    before = await _state(world)
    response = await world.admin(method, path, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith(f'unknown field "{unknown}" (this route takes: '), error
    assert await _state(world) == before


async def test_a_misspelt_purge_neither_bans_nor_purges(world: World) -> None:
    assert (await world.post([world.beacon(world.alice)]))[0]["status"] == "new"
    response = await world.admin("PUT", f"/admin/bans/{world.alice.did}", {"Purge": True})
    assert response.status_code == 400, response.text
    assert response.json() == {"error": 'unknown field "Purge" (this route takes: purge, reason)'}
    assert (await world.admin("GET", "/admin/bans")).json() == {"bans": [], "cursor": None}
    assert (await world.client.get(f"/beacons/{world.alice.did}")).status_code == 200
    assert not world.audits("ban")


async def test_every_unknown_field_is_named_up_to_five(world: World) -> None:
    path = f"/admin/bans/{world.alice.did}"
    two = await world.admin("PUT", path, {"purge": True, "b": 1, "a": 2})
    assert two.json()["error"].startswith('unknown fields "a", "b" (')
    many = {f"x{i}": i for i in range(8)}
    eight = await world.admin("PUT", path, many)
    assert eight.status_code == 400
    assert eight.json()["error"].startswith(
        'unknown fields "x0", "x1", "x2", "x3", "x4" and 3 more ('
    )


async def test_a_field_name_no_answer_could_carry_is_named_escaped(world: World) -> None:
    """A name holding a lone surrogate (JSON ``"\\ud800"``) is still a 400, not a 500."""
    headers = {**world.auth(), "Content-Type": "application/json"}
    body = b'{"a\\ud800b": true, "' + b"n" * 100 + b'": 1}'
    response = await world.client.put(
        f"/admin/bans/{world.alice.did}", content=body, headers=headers
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert '"a\\ud800b"' in error and '"' + "n" * 64 + '"' in error


async def test_known_fields_alone_still_work(world: World) -> None:
    response = await world.admin(
        "PUT", f"/admin/bans/{world.alice.did}", {"reason": "spam", "purge": True}
    )
    assert response.status_code == 200, response.text
    assert response.json()["purge"] is not None
