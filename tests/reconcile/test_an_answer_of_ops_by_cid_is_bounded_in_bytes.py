"""A hostile peer is bounded in the bytes it makes the relay hold: ops are
up to 64 KiB, so 1000 CIDs in a 63 KB ``POST /sync/operations`` could name
64 MiB of ops, read, held and encoded at once (eight such requests raised
the relay's memory by ~340 MB). An answer holds at most
``MAX_FETCH_ANSWER_BYTES``; ops are read a chunk at a time and an answer
that would pass the bound is a 413 with a JSON error, which the initiator
takes as "ask for fewer" (it halves the batch), so a reconcile still
fetches everything."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from relay import create_relay
from relay.reconcile.server import MAX_FETCH_ANSWER_BYTES
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS, log_cids, post
from tests.support.served import TRANSPORTS, served_relay

TOKEN_CHARS = 21_000  # an artifact near its 16 KiB CBOR payload cap


def big_artifacts(count: int) -> list[str]:
    b = WorkloadBuilder(seed=11, start_ms=PAST_MS)
    author = b.identity()
    for i in range(count):
        b.artifact(author, name=f"{i} " + "x" * 15_500)
    assert len(b.tokens[-1]) > TOKEN_CHARS
    return b.tokens


# just past the bound, so one answer cannot hold them all
OPS = big_artifacts(MAX_FETCH_ANSWER_BYTES // TOKEN_CHARS + 2)


async def hold(http: httpx.AsyncClient) -> list[str]:
    for at in range(0, len(OPS), 100):
        assert {r["status"] for r in await post(http, OPS[at : at + 100])} == {"new"}
    return await log_cids(http)


@pytest.fixture(params=TRANSPORTS)
async def http(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    async with served_relay(MemoryStore(), request.param) as served:
        yield served.client


async def test_an_answer_past_the_bound_is_a_413(http: httpx.AsyncClient) -> None:
    cids = await hold(http)
    response = await http.post("/sync/operations", json={"cids": cids})
    assert response.status_code == 413
    assert "fewer" in response.json()["error"]
    # half of them fit: served in full, in one answer under the bound
    half = await http.post("/sync/operations", json={"cids": cids[: len(cids) // 2]})
    assert half.status_code == 200 and len(half.content) <= MAX_FETCH_ANSWER_BYTES
    assert len(half.json()["operations"]) == len(cids) // 2


async def test_a_reconcile_still_fetches_every_big_op() -> None:
    source = create_relay(MemoryStore())
    mirror = create_relay(MemoryStore())
    async with (
        serve_on_loopback(source.app) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
        mirror.running(),
    ):
        cids = await hold(http)
        report = await mirror.reconcile(url, direction="pull")
        assert report.error is None and report.fetched == len(cids)
        assert set(await mirror.store.read_operations(cids)) == set(cids)
