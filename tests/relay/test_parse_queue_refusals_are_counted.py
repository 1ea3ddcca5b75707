"""Every costly body refused 503 because too many wait for the parse child
(``--parse-queue``) is counted in ``/metrics``:
``dfos_relay_parse_queue_refused_total{body}``, by what was refused
(``operations``: a ``POST /operations`` body; ``documents``: a content-plane
upload), both series shown from the start at 0.

Through hypercorn on loopback; the parse child is a real process stopped
with SIGSTOP so that the admitted body waits while one more arrives.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from relay import Relay
from tests.content.conftest import start_world

from .test_costly_bodies_waiting_for_the_parse_child_are_bounded import (
    HOSTILE,
    served_with,
    stopped,
)

BOUND = 1
COSTLY_DOCUMENT = b"[" + b"0," * 64 * 1024 + b"0]"  # many values: checked in the child
NAME = "dfos_relay_parse_queue_refused_total"


@pytest.fixture
async def served() -> AsyncIterator[tuple[Relay, httpx.AsyncClient]]:
    async with served_with(BOUND) as both:
        yield both


async def refused(client: httpx.AsyncClient) -> dict[str, float]:
    """The counter's value per ``body`` label, read from ``/metrics``."""
    text = (await client.get("/metrics")).text
    values = {}
    for line in text.splitlines():
        if line.startswith(NAME + "{"):
            labels, value = line[len(NAME) :].rsplit(" ", 1)
            values[labels] = float(value)
    return values


async def test_a_refused_operations_body_is_counted(
    served: tuple[Relay, httpx.AsyncClient],
) -> None:
    relay, client = served
    assert await refused(client) == {'{body="documents"}': 0, '{body="operations"}': 0}
    assert (await client.post("/operations", content=HOSTILE)).status_code == 400  # child up
    with stopped(relay):
        waiting = asyncio.create_task(client.post("/operations", content=HOSTILE))
        while relay.parse_pool.waiting.count < BOUND:
            await asyncio.sleep(0.01)
        answer = await asyncio.wait_for(client.post("/operations", content=HOSTILE), 30)
        counted = await refused(client)
    assert (await waiting).status_code == 400  # parsed once the child runs again
    assert answer.status_code == 503
    assert counted == {'{body="documents"}': 0, '{body="operations"}': 1}


async def test_a_refused_document_upload_is_counted(
    served: tuple[Relay, httpx.AsyncClient],
) -> None:
    relay, client = served
    w = await start_world(relay, client)
    assert (await w.upload(w.alice, w.genesis, COSTLY_DOCUMENT)).status_code == 400  # child up
    with stopped(relay):
        waiting = asyncio.create_task(w.upload(w.alice, w.genesis, COSTLY_DOCUMENT))
        while relay.documents_waiting.count < BOUND:
            await asyncio.sleep(0.01)
        answer = await asyncio.wait_for(w.upload(w.alice, w.genesis, COSTLY_DOCUMENT), 30)
        counted = await refused(client)
    assert (await waiting).status_code == 400  # checked once the child runs again
    assert answer.status_code == 503
    assert counted == {'{body="documents"}': 1, '{body="operations"}': 0}
