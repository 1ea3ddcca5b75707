"""Small helpers for driving a relay over HTTP in tests (no fakes: these only
shorten the requests every relay test makes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

PAST_MS = 1_700_000_000_000  # 2023-11: workloads start here, far from any guard


async def post(client: httpx.AsyncClient, tokens: Sequence[str]) -> list[dict[str, Any]]:
    """POST /operations and return ``results`` (asserting a 200)."""
    response = await client.post("/operations", json={"operations": list(tokens)})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    assert len(results) == len(tokens)
    return results


async def post_each(client: httpx.AsyncClient, tokens: Sequence[str]) -> list[dict[str, Any]]:
    """Submit tokens one request at a time; the flattened results."""
    out: list[dict[str, Any]] = []
    for token in tokens:
        out.extend(await post(client, [token]))
    return out


def statuses(results: Sequence[dict[str, Any]]) -> list[str]:
    return [r["status"] for r in results]


async def log_cids(client: httpx.AsyncClient, path: str = "/log") -> list[str]:
    """Every CID of a (global or per-chain) log, following the cursor."""
    cids: list[str] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after"] = after
        response = await client.get(path, params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        cids.extend(e["cid"] for e in body["entries"])
        after = body["cursor"]
        if after is None:
            return cids


async def get_json(client: httpx.AsyncClient, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status_code == status, response.text
    return response.json()
