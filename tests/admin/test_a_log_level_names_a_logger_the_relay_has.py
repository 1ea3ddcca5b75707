"""``PUT /admin/log-level`` sets a logger the relay has: a name it has not
is a 400, and no logger is made for it (``logging.getLogger`` keeps every
logger it makes, so each new name sent once grew the process for good)."""

from __future__ import annotations

import logging

from .conftest import World


async def test_an_unknown_logger_is_a_400_and_none_is_made(world: World) -> None:
    names = ["dfos_relay.no_such_module", "x" * 100_000, "Dfos_relay.audit"]
    for name in names:
        response = await world.admin("PUT", "/admin/log-level", {"level": "debug", "logger": name})
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith("no logger named "), response.text
        assert len(response.text) < 300
        assert name not in logging.Logger.manager.loggerDict
    assert {line["outcome"] for line in world.audits("log-level")} == {"refused"}


async def test_a_logger_the_relay_has_is_set(world: World) -> None:
    peering = logging.getLogger("dfos_relay.peering")
    level = peering.level
    try:
        body = {"level": "error", "logger": "dfos_relay.peering"}
        response = await world.admin("PUT", "/admin/log-level", body)
        assert response.status_code == 200, response.text
        assert peering.level == logging.ERROR
    finally:
        peering.setLevel(level)
