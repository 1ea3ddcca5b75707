"""If a scoped op's closure cannot be satisfied, the op does not count as
replicated: the consumer's link goes to ``repairing`` with diagnostics that
name the missing dependency class and ids, applies nothing partial past it,
and stays there until the dependency arrives."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from peer.base import PeerConfig
from relay import create_relay
from relay.asgi import store_from_url
from relay.peering.service import build_peering
from relay.scope import parse_scope
from relay.testing.server import serve_on_loopback
from tests.peering.mesh import FAST
from tests.support.asgi_client import asgi_client

from .world import build_world, remove_identity


async def until(check: Callable[[], Any], seconds: float = 20.0) -> Any:
    for _ in range(int(seconds / 0.05)):
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("behaviour", ["live", "reconcile"])
async def test_a_missing_closure_member_holds_the_link_in_repairing(
    tmp_path: Path, behaviour: str
) -> None:
    world = build_world(seed=51)
    scope = parse_scope(world.chain.content_id)
    db = tmp_path / "serving.db"
    serving = create_relay(store_from_url(f"sqlite:///{db}"))
    async with serve_on_loopback(serving.app) as serving_url:
        await serving.ingest(world.tokens)
        remove_identity(db, world.witness.did)
        async with httpx.AsyncClient(base_url=serving_url) as http:
            page = (await http.get("/log", params={"scope": scope.query_value()})).json()
        # the serving relay says what it cannot serve
        assert page["closureMissing"] == {"identity": [world.witness.did]}

        config = replace(FAST, scope=scope, reconcile_interval_s=0.2)
        flags = {"gossip": False, "read_through": False, "sync": False, behaviour: True}
        peering = build_peering([PeerConfig(serving_url, **flags)], config=config)
        consumer = create_relay(store_from_url("memory://"), peering=peering)
        async with (
            consumer.running(),
            asgi_client(
                consumer.app, client=("127.0.0.1", 5000), base_url="http://consumer.test"
            ) as client,
        ):

            async def in_link() -> dict[str, Any] | None:
                peers = (await client.get("/peers")).json()["peers"]
                links = [link for p in peers for link in p["links"] if link["direction"] == "in"]
                return links[0] if links else None

            async def repairing() -> dict[str, Any] | None:
                link = await in_link()
                return link if link and link["state"] == "repairing" else None

            link = await until(repairing)
            assert link["scopeId"] == scope.scope_id
            assert link["diagnostics"]["missing"] == {"identity": [world.witness.did]}
            assert world.countersign in link["diagnostics"]["waiting"]
            if behaviour == "live":
                # nothing partial counts as applied: the applied token stops before the op
                assert link["pending"] and link["appliedToken"] != link["receivedToken"]
            assert await consumer.store.get_operation(world.countersign) is None
            await asyncio.sleep(0.5)
            assert (await in_link() or {}).get("state") == "repairing"  # it stays there

            # the dependency comes back on the serving side: the link repairs itself
            witness_genesis = world.tokens[1]
            await serving.ingest([witness_genesis])

            async def live() -> dict[str, Any] | None:
                link = await in_link()
                return link if link and link["state"] == "live" else None

            link = await until(live)
            assert "missing" not in link["diagnostics"] and not link["pending"]
            assert not link["diagnostics"].get("waiting")
            assert await consumer.store.get_operation(world.countersign) is not None
