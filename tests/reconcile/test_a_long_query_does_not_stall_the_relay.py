"""A Negentropy query of many ranges (1 MiB holds ~350,000 skip ranges, a
second or more of work) is answered in steps: the relay serves other
requests while it runs, in-process and through hypercorn."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from relay.protocol.negentropy import INFINITY, Bound, Mode, encode_varint
from relay.protocol.negentropy.wire import BoundWriter
from stores.memory import MemoryStore
from tests.support.served import TRANSPORTS, served_relay

OCTET = {"content-type": "application/octet-stream"}


def skip_ranges_filling(size: int) -> bytes:
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


async def test_other_requests_are_served_while_a_long_query_runs(
    http: httpx.AsyncClient,
) -> None:
    query = skip_ranges_filling(1024 * 1024)
    started = time.perf_counter()
    long_round = asyncio.create_task(
        http.post("/sync/negentropy", content=query, headers=OCTET, timeout=120)
    )
    await asyncio.sleep(0.05)  # the round is under way
    answered: list[float] = []
    while not long_round.done():
        response = await http.get("/log")
        assert response.status_code == 200
        answered.append(time.perf_counter() - started)
        await asyncio.sleep(0.05)
    reply = await long_round
    took = time.perf_counter() - started
    assert reply.status_code == 200 and reply.content == b"\x61"  # all skipped: nothing to say
    # the log was read again and again while the round ran, not once after it
    assert len(answered) >= 5
    assert sum(1 for at in answered if at < took * 0.8) >= 3
