"""At most ``RelayConfig.parse_queue`` costly ``POST /operations`` bodies wait
for the relay's one parse child (``relay.parse_pool``): one more is answered
at once 503 with ``Retry-After`` and the JSON error shape the changes feed
uses for its subscriber cap, and its body is not kept. So a flood of hostile
bodies holds at most that many bodies in memory, however many arrive, while
ordinary batches (parsed inline) are served as before.

Through hypercorn on loopback; the parse child is a real process, stopped
with SIGSTOP so that the admitted bodies stay waiting while the rest arrive.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest

from relay import Relay, RelayConfig, create_relay
from relay.config import DEFAULT_MAX_BODY_BYTES, MAX_OPERATIONS_PER_REQUEST
from relay.parse_pool import PARSE_BUSY_RETRY_AFTER_S
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS

BOUND = 2
FLOOD = 10  # concurrent hostile bodies, 4 MiB each
# ~1.4 million empty objects: costly, answered 400 (over 100 operations)
HOSTILE = b'{"operations":[' + b"{}," * ((DEFAULT_MAX_BODY_BYTES - 20) // 3) + b"{}]}"
MIB = 1024 * 1024


@asynccontextmanager
async def served_with(parse_queue: int) -> AsyncIterator[tuple[Relay, httpx.AsyncClient]]:
    """A relay with that ``parse_queue`` under hypercorn on loopback, and a client."""
    relay = create_relay(MemoryStore(), config=RelayConfig(parse_queue=parse_queue))
    async with (
        serve_on_loopback(relay.app) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as client,
    ):
        yield relay, client


@pytest.fixture
async def served() -> AsyncIterator[tuple[Relay, httpx.AsyncClient]]:
    async with served_with(BOUND) as both:
        yield both


@contextmanager
def stopped(relay: Relay) -> Iterator[None]:
    """The relay's parse child stopped (SIGSTOP) meanwhile: it parses nothing."""
    child = relay.parse_pool._child
    assert child is not None and child.returncode is None
    os.kill(child.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(child.pid, signal.SIGCONT)


async def first_answers(tasks: list[asyncio.Task[httpx.Response]], count: int) -> None:
    """Until ``count`` of ``tasks`` are answered (the refused ones: at once)."""
    pending = set(tasks)
    while len(tasks) - len(pending) < count:
        done, pending = await asyncio.wait(pending, timeout=30, return_when="FIRST_COMPLETED")
        assert done, "the bodies over the bound were not answered while the child was stopped"


async def test_a_costly_body_over_the_bound_is_answered_503_and_not_kept(
    served: tuple[Relay, httpx.AsyncClient],
) -> None:
    relay, client = served
    assert len(HOSTILE) <= DEFAULT_MAX_BODY_BYTES
    assert (await client.post("/operations", content=HOSTILE)).status_code == 400  # child up
    tracemalloc.start()
    try:
        with stopped(relay):
            before, _ = tracemalloc.get_traced_memory()
            flood = [
                asyncio.create_task(client.post("/operations", content=HOSTILE))
                for _ in range(FLOOD)
            ]
            await first_answers(flood, FLOOD - BOUND)
            await asyncio.sleep(0.2)  # the refused requests' buffers are let go
            held, _ = tracemalloc.get_traced_memory()
            assert relay.parse_pool.waiting.count == BOUND
            # all FLOOD bodies kept would be 40 MiB and more; BOUND of them
            # (one more pickled copy on its way to the child) stay under 20
            assert (held - before) / MIB < (BOUND + 3) * len(HOSTILE) / MIB
    finally:
        tracemalloc.stop()
    answers = await asyncio.gather(*flood)
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [400] * BOUND + [503] * (FLOOD - BOUND)
    for answer in answers:
        if answer.status_code == 503:
            assert answer.headers["retry-after"] == str(PARSE_BUSY_RETRY_AFTER_S)
            assert answer.headers["content-type"] == "application/json"
            assert answer.json() == {
                "error": f"too many large bodies waiting (at most {BOUND}); retry later",
                "retryAfter": PARSE_BUSY_RETRY_AFTER_S,
            }
    assert relay.parse_pool.waiting.count == 0
    # the line is free again: the next costly body is parsed
    assert (await client.post("/operations", content=HOSTILE)).status_code == 400


async def test_an_ordinary_batch_is_served_while_the_line_is_full(
    served: tuple[Relay, httpx.AsyncClient],
) -> None:
    relay, client = served
    tokens = mixed_workload(MAX_OPERATIONS_PER_REQUEST, seed=5, now_ms=PAST_MS)
    batch = json.dumps({"operations": tokens[:MAX_OPERATIONS_PER_REQUEST]}).encode()
    assert (await client.post("/operations", content=HOSTILE)).status_code == 400  # child up
    with stopped(relay):
        flood = [
            asyncio.create_task(client.post("/operations", content=HOSTILE))
            for _ in range(BOUND + 1)
        ]
        await first_answers(flood, 1)
        assert relay.parse_pool.waiting.count == BOUND  # the line is full
        answer = await asyncio.wait_for(client.post("/operations", content=batch), 30)
        assert answer.status_code == 200
        assert {r["status"] for r in answer.json()["results"]} <= {"new", "pending"}
    await asyncio.gather(*flood)
