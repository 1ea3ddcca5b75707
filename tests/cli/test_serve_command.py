"""``dfos-relay serve`` as a subprocess over each store: a workload posted,
/metrics scraped, SIGTERM mid-batch loses nothing accepted, and a restart
keeps the relay DID."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from relay.testing.workload import mixed_workload

from .conftest import RelayProcess

BATCH = 100


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_memory_serve_workload_metrics_and_probes() -> None:
    relay = RelayProcess(["--store", "memory://", "--log-level", "info"])
    try:
        tokens = mixed_workload(60, seed=7)
        statuses: list[str] = []
        with httpx.Client(base_url=relay.url, timeout=30) as client:
            for i in range(0, len(tokens), BATCH):
                r = client.post("/operations", json={"operations": tokens[i : i + BATCH]})
                assert r.status_code == 200
                statuses += [res["status"] for res in r.json()["results"]]
            assert statuses == ["new"] * len(tokens)
            assert client.get("/healthz").json() == {"status": "ok"}
            ready = client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["status"] == "ready"
            echoed = client.get("/log", headers={"X-Request-ID": "req-123"})
            assert echoed.headers["x-request-id"] == "req-123"
            assert re.fullmatch(r"[0-9a-f]{32}", client.get("/healthz").headers["x-request-id"])
            text = client.get("/metrics").text
        assert metric(text, "dfos_relay_ingested_total", status="new") == len(tokens)
        assert metric(text, "dfos_relay_ingested_total", kind="countersign", status="new") > 0
        assert metric(text, "dfos_relay_log_length") == len(tokens) + 2  # + relay identity
        assert metric(text, "dfos_relay_pending_operations") == 0
        assert metric(
            text,
            "dfos_relay_http_request_duration_seconds_count",
            route="/operations",
            method="POST",
        ) == -(-len(tokens) // BATCH)
    finally:
        code, err = relay.stop()
    assert code == 0
    assert '"request_id": "req-123"' in err  # structured access log line


async def _post_all(url: str, batches: list[list[str]], relay: RelayProcess) -> list[str]:
    """Post every batch concurrently; SIGTERM once the first answers arrive.
    Returns the CIDs answered ``new``."""
    accepted: list[str] = []
    answered = asyncio.Event()

    async def post(client: httpx.AsyncClient, batch: list[str]) -> None:
        try:
            r = await client.post("/operations", json={"operations": batch})
        except httpx.HTTPError:
            return  # refused or cut after SIGTERM: nothing was promised
        if r.status_code == 200:
            accepted.extend(x["cid"] for x in r.json()["results"] if x["status"] == "new")
            answered.set()

    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        tasks = [asyncio.create_task(post(client, b)) for b in batches]
        await answered.wait()
        relay.terminate()
        await asyncio.gather(*tasks)
    return accepted


def _logged_cids(client: httpx.Client) -> set[str]:
    cids: set[str] = set()
    params: dict[str, str | int] = {"limit": 1000}
    while True:
        page = client.get("/log", params=params).json()
        cids.update(entry["cid"] for entry in page["entries"])
        if page["cursor"] is None or not page["entries"]:
            return cids
        params["after"] = page["cursor"]


def _persistent_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/relay.db"
    return request.getfixturevalue("postgres_schema_url")  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigterm_mid_batch_loses_nothing_and_did_survives(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = _persistent_store(kind, tmp_path, request)
    tokens = mixed_workload(1200, seed=11)
    batches = [tokens[i : i + BATCH] for i in range(0, len(tokens), BATCH)]

    first = RelayProcess(["--store", store])
    did = httpx.get(first.url + "/.well-known/dfos-relay").json()["did"]
    accepted = asyncio.run(_post_all(first.url, batches, first))
    code, err = first.stop()
    assert code == 0, err
    assert accepted, "no batch was answered before shutdown"

    second = RelayProcess(["--store", store])
    try:
        with httpx.Client(base_url=second.url, timeout=30) as client:
            assert client.get("/.well-known/dfos-relay").json()["did"] == did
            assert set(accepted) <= _logged_cids(client)
    finally:
        second.stop()
