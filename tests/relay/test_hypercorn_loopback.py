"""The core flows through a real hypercorn server on loopback, httpx over TCP:
well-known, mixed-order ingestion, state reads, countersignatures, the log,
JSON errors and the body cap."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator

import httpx
import pytest

from relay import RelayConfig, create_relay
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS, get_json, log_cids, post, statuses


@pytest.fixture
async def tcp_client(store: RelayStore) -> AsyncIterator[httpx.AsyncClient]:
    relay = create_relay(store, config=RelayConfig(max_body_bytes=64 * 1024))
    async with (
        serve_on_loopback(relay.app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


async def test_core_flows_over_tcp(tcp_client: httpx.AsyncClient) -> None:
    client = tcp_client
    known = await get_json(client, "/.well-known/dfos-relay")
    assert known["proof"] is True
    await get_json(client, f"/identities/{known['did']}")
    b = WorkloadBuilder(seed=131, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    b.content_update(chain, parent=chain.ops[0])
    b.beacon(alice)
    art = b.artifact(bob)
    b.countersign(alice, art)
    tokens = list(b.tokens)
    random.Random(1).shuffle(tokens)
    await post(client, tokens[:4])  # some of these wait for the rest
    await post(client, tokens[4:])
    assert statuses(await post(client, b.tokens)) == ["duplicate"] * len(b.tokens)
    content = await get_json(client, f"/content/{chain.content_id}")
    assert content["headCID"] == chain.head_cid
    assert (await get_json(client, f"/countersignatures/{art}"))["countersignatures"] == [
        b.tokens[-1]
    ]
    assert (await get_json(client, f"/beacons/{alice.did}"))["did"] == alice.did
    assert len(await log_cids(client)) == 2 + len(b.tokens)


async def test_errors_are_json_over_tcp(tcp_client: httpx.AsyncClient) -> None:
    client = tcp_client
    for response, status in [
        (await client.post("/operations", content=b"{nope"), 400),
        (await client.post("/operations", json={"operations": []}), 400),
        (await client.get("/nowhere"), 404),
        (await client.get("/log?limit=0"), 400),
        (await client.post("/operations", content=json.dumps({"operations": ["x" * 70_000]})), 413),
    ]:
        assert response.status_code == status
        assert response.headers["content-type"].startswith("application/json")
        assert "error" in response.json()
