"""/healthz, /readyz, /metrics and request ids, in process (ASGI transport)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from relay import Relay, create_relay
from relay.observability import JsonFormatter
from relay.testing.workload import mixed_workload
from stores.base import StoreError
from tests.support.asgi_client import asgi_client

from .test_serve_command import metric


# the shared ``client`` fixture (tests/conftest.py) reaches this relay
@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    r = create_relay()
    async with r.running():
        yield r


async def test_ingestion_counts_by_kind_and_status(client: httpx.AsyncClient) -> None:
    tokens = mixed_workload(20, seed=5)
    await client.post("/operations", json={"operations": tokens})
    await client.post("/operations", json={"operations": [*tokens[:3], "not-a-jws"]})
    text = (await client.get("/metrics")).text
    assert metric(text, "dfos_relay_ingested_total", status="new") == len(tokens)
    assert metric(text, "dfos_relay_ingested_total", kind="identity-op", status="duplicate") >= 1
    assert metric(text, "dfos_relay_ingested_total", kind="unknown", status="rejected") == 1
    assert metric(text, "dfos_relay_log_length") == len(tokens) + 2
    assert (
        metric(
            text,
            "dfos_relay_http_request_duration_seconds_count",
            route="/operations",
            status="200",
        )
        == 2
    )


async def test_peer_sync_recording_api(relay: Relay, client: httpx.AsyncClient) -> None:
    relay.metrics.peer_sync("http://peer:4444", lag=42, ok=True)
    relay.metrics.peer_sync("http://peer:4444", lag=None, ok=False)
    text = (await client.get("/metrics")).text
    assert metric(text, "dfos_relay_peer_sync_lag_operations", peer="http://peer:4444") == 42
    assert metric(text, "dfos_relay_peer_sync_failures_total", peer="http://peer:4444") == 1
    assert metric(text, "dfos_relay_peer_syncs_total", result="ok") == 1


async def test_each_relay_has_its_own_registry() -> None:
    a, b = create_relay(), create_relay()
    a.metrics.peer_sync("http://p", lag=1, ok=False)
    assert b"http://p" not in b.metrics.render()


async def test_probes(
    relay: Relay, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).status_code == 200

    async def down() -> None:
        raise StoreError("database is gone")

    monkeypatch.setattr(relay.store, "ping", down)
    answer = await client.get("/readyz")
    assert answer.status_code == 503 and answer.json()["store"] == "unreachable"
    assert (await client.get("/healthz")).status_code == 200  # liveness ignores the store


async def test_readyz_is_unavailable_before_start() -> None:
    relay = create_relay()
    async with asgi_client(relay.app) as c:
        answer = await c.get("/readyz")
    assert answer.status_code == 503 and answer.json()["sequencer"] == "stopped"


async def test_request_id_is_honoured_or_generated(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dfos_relay.access")
    given = await client.get("/log", headers={"X-Request-ID": "trace-7"})
    assert given.headers["x-request-id"] == "trace-7"
    made = await client.get("/log", headers={"X-Request-ID": "bad id with spaces"})
    assert made.headers["x-request-id"] != "bad id with spaces"
    # a non-ASCII id would come back altered (UTF-8 encoded): a fresh one instead
    latin = await client.get("/log", headers={"X-Request-ID": b"trace-\xe9"})
    assert dict(latin.headers.raw)[b"x-request-id"] != b"trace-\xc3\xa9"
    line = json.loads(JsonFormatter().format(caplog.records[0]))
    assert line["msg"] == "GET /log 200" and line["status"] == 200
