"""An admin call carries one ``Authorization`` header: with two, which one a
proxy in front checked is unknown, so the call is refused (401, JSON) rather
than admitted on whichever the relay reads first."""

from __future__ import annotations

from .conftest import World


async def test_two_authorization_headers_are_a_401_whatever_their_order(world: World) -> None:
    valid = f"Bearer {world.token()}"
    for pair in ((valid, "Bearer x"), ("Bearer x", valid), (valid, valid)):
        headers = [("Authorization", value) for value in pair]
        response = await world.client.put(
            f"/admin/bans/{world.alice.did}", json={}, headers=headers
        )
        assert response.status_code == 401, response.text
        assert response.json() == {"error": "one Authorization header is allowed"}
    assert (await world.admin("GET", "/admin/bans")).json() == {"bans": [], "cursor": None}
    assert {line["outcome"] for line in world.audits("authenticate")} == {"refused"}
    assert world.audits("ban") == []
