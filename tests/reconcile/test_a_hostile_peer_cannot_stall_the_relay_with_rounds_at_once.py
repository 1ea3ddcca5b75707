"""A hostile peer is bounded and cannot stall the relay: a large Negentropy
query is up to a second of CPU however it is paced, so the relay runs at
most ``MAX_LARGE_ROUNDS`` of them at once and answers one more 503 with
``Retry-After`` and a JSON error; small rounds are never refused. Before,
every large round ran at once: eight made every other request (an ingest,
a log read) wait ~8 times as long, in-process and through hypercorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from relay.protocol.negentropy import INFINITY, Bound, Mode, encode_varint
from relay.protocol.negentropy.wire import BoundWriter
from relay.reconcile.server import LARGE_ROUND_BYTES, MAX_LARGE_ROUNDS
from relay.testing.workload import WorkloadBuilder
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS, post
from tests.support.served import TRANSPORTS, served_relay

OCTET = {"content-type": "application/octet-stream"}


def skip_ranges_filling(size: int) -> bytes:
    """Tiny skip ranges: the costliest query per byte to read, with nothing to answer."""
    writer, out, at = BoundWriter(), bytearray(b"\x61"), 0
    while len(out) < size - 16:
        at += 1
        out += writer.encode(Bound(at)) + encode_varint(Mode.SKIP)
    out += writer.encode(Bound(INFINITY)) + encode_varint(Mode.SKIP)
    return bytes(out)


@pytest.fixture(params=TRANSPORTS)
async def http(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    async with served_relay(MemoryStore(), request.param) as served:
        yield served.client


async def test_large_rounds_past_the_bound_are_refused_with_503(http: httpx.AsyncClient) -> None:
    large = skip_ranges_filling(1024 * 1024)
    many = MAX_LARGE_ROUNDS + 4
    rounds = [
        asyncio.create_task(http.post("/sync/negentropy", content=large, headers=OCTET, timeout=60))
        for _ in range(many)
    ]
    # a small round meanwhile is served, and so is an ingest
    await asyncio.sleep(0.05)
    small = await http.post("/sync/negentropy", content=b"\x61\x00\x00\x00", headers=OCTET)
    assert (small.status_code, small.content) == (200, b"\x61")
    b = WorkloadBuilder(seed=3, start_ms=PAST_MS)
    b.identity()
    assert [r["status"] for r in await post(http, b.tokens)] == ["new"]
    answers = await asyncio.gather(*rounds)
    served = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 503]
    assert len(served) + len(refused) == many
    assert 1 <= len(served) <= MAX_LARGE_ROUNDS + 1  # one may finish before the last arrives
    for answer in refused:
        assert "negentropy" in answer.json()["error"]
        assert int(answer.headers["retry-after"]) >= 1
    # nothing is held once they are done: a large round is served again
    again = await http.post("/sync/negentropy", content=large, headers=OCTET, timeout=60)
    assert (again.status_code, again.content) == (200, b"\x61")


async def test_a_round_just_under_the_large_size_is_never_refused(
    http: httpx.AsyncClient,
) -> None:
    small = skip_ranges_filling(LARGE_ROUND_BYTES)
    assert len(small) <= LARGE_ROUND_BYTES
    answers = await asyncio.gather(
        *(
            http.post("/sync/negentropy", content=small, headers=OCTET, timeout=60)
            for _ in range(MAX_LARGE_ROUNDS + 4)
        )
    )
    assert all(a.status_code == 200 and a.content == b"\x61" for a in answers)
