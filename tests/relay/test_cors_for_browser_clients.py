"""CORS for browser clients (additive): off by default; with configured
origins, simple and preflight requests from those origins get the CORS
headers (on every answer, a 429 included) and other origins get none.
In-process and over hypercorn, on every store."""

from __future__ import annotations

import httpx
import pytest

from relay import RelayConfig
from relay.limits import parse_rate_limit
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS
from tests.support.served import TRANSPORTS, served_relay

APP = "https://app.example"
PREFLIGHT = {
    "origin": APP,
    "access-control-request-method": "POST",
    "access-control-request-headers": "content-type",
}


async def preflight(client: httpx.AsyncClient, origin: str = APP) -> httpx.Response:
    return await client.options("/operations", headers={**PREFLIGHT, "origin": origin})


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cors_is_off_by_default(store: RelayStore, transport: str) -> None:
    async with served_relay(store, transport) as served:
        response = await served.client.get("/log", headers={"origin": APP})
        assert response.status_code == 200
        assert "access-control-allow-origin" not in response.headers
        answer = await preflight(served.client)
        assert answer.status_code == 405
        assert "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_configured_origins_are_allowed(store: RelayStore, transport: str) -> None:
    config = RelayConfig(cors_origins=(APP, "http://localhost:5173"))
    async with served_relay(store, transport, config) as served:
        client = served.client
        b = WorkloadBuilder(seed=195, start_ms=PAST_MS)
        b.identity()
        posted = await client.post(
            "/operations", json={"operations": b.tokens}, headers={"origin": APP}
        )
        assert posted.status_code == 200
        assert posted.headers["access-control-allow-origin"] == APP
        page = await client.get("/log?limit=1", headers={"origin": "http://localhost:5173"})
        assert page.headers["access-control-allow-origin"] == "http://localhost:5173"
        assert "x-dfos-cursor" in page.headers["access-control-expose-headers"].lower()
        answer = await preflight(client)
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == APP
        assert "POST" in answer.headers["access-control-allow-methods"]
        assert "content-type" in answer.headers["access-control-allow-headers"].lower()
        # another origin gets no CORS headers, and its preflight is refused
        other = await client.get("/log", headers={"origin": "https://evil.example"})
        assert other.status_code == 200
        assert "access-control-allow-origin" not in other.headers
        refused = await preflight(client, "https://evil.example")
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_any_origin_and_a_rate_limited_answer(store: RelayStore, transport: str) -> None:
    config = RelayConfig(cors_origins=("*",), rate_limit=parse_rate_limit("1/m"))
    async with served_relay(store, transport, config) as served:
        headers = {"origin": "https://anywhere.example"}
        for expected in (200, 429):
            response = await served.client.post(
                "/operations", json={"operations": ["x"]}, headers=headers
            )
            assert response.status_code == expected
            assert response.headers["access-control-allow-origin"] == "*"
