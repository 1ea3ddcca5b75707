"""A hostile peer is bounded and cannot stall the relay with rounds at
once: a round of many ranges is paced, but each pause of the loop runs a
step of every round under way, so every other request (an ingest, a log
read) waits a step per round for each of its awaits. The relay lets at
most ``MAX_LONG_ROUNDS`` rounds pause at once and answers one more 503
with ``Retry-After`` and a JSON error; a round done in one step (under 256
ranges) is never refused. Before, any number ran at once: 32 queries of
64 KiB made a 20-op ingest wait ~300 ms. In-process and through hypercorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from relay.protocol.negentropy import INFINITY, Bound, Mode, encode_varint
from relay.protocol.negentropy.wire import BoundWriter
from relay.reconcile.server import MAX_LONG_ROUNDS
from relay.testing.workload import WorkloadBuilder
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS, post
from tests.support.served import TRANSPORTS, served_relay

OCTET = {"content-type": "application/octet-stream"}


def skip_ranges(count: int) -> bytes:
    """Tiny skip ranges: the costliest query per byte to read, with nothing to answer."""
    writer, out = BoundWriter(), bytearray(b"\x61")
    for at in range(1, count):
        out += writer.encode(Bound(at)) + encode_varint(Mode.SKIP)
    out += writer.encode(Bound(INFINITY)) + encode_varint(Mode.SKIP)
    return bytes(out)


@pytest.fixture(params=TRANSPORTS)
async def http(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    async with served_relay(MemoryStore(), request.param) as served:
        yield served.client


async def test_long_rounds_past_the_bound_are_refused_with_503(http: httpx.AsyncClient) -> None:
    long_query = skip_ranges(20_000)  # ~60 KiB, 80 steps
    many = MAX_LONG_ROUNDS + 6
    rounds = [
        asyncio.create_task(
            http.post("/sync/negentropy", content=long_query, headers=OCTET, timeout=60)
        )
        for _ in range(many)
    ]
    # a short round meanwhile is served, and so is an ingest
    await asyncio.sleep(0.01)
    small = await http.post("/sync/negentropy", content=b"\x61\x00\x00\x00", headers=OCTET)
    assert (small.status_code, small.content) == (200, b"\x61")
    b = WorkloadBuilder(seed=3, start_ms=PAST_MS)
    b.identity()
    assert [r["status"] for r in await post(http, b.tokens)] == ["new"]
    answers = await asyncio.gather(*rounds)
    served = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 503]
    assert len(served) + len(refused) == many
    assert 1 <= len(served) <= MAX_LONG_ROUNDS + 2  # some may end before the last arrive
    for answer in refused:
        assert "negentropy" in answer.json()["error"]
        assert int(answer.headers["retry-after"]) >= 1
    # nothing is held once they are done: long rounds are served again
    again = await http.post("/sync/negentropy", content=long_query, headers=OCTET, timeout=60)
    assert (again.status_code, again.content) == (200, b"\x61")


async def test_rounds_done_in_one_step_are_never_refused(http: httpx.AsyncClient) -> None:
    short = skip_ranges(255)
    answers = await asyncio.gather(
        *(
            http.post("/sync/negentropy", content=short, headers=OCTET, timeout=60)
            for _ in range(MAX_LONG_ROUNDS + 30)
        )
    )
    assert all((a.status_code, a.content) == (200, b"\x61") for a in answers)
