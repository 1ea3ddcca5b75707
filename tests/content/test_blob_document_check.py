"""Checking an uploaded document (WEB-RELAY.md "Blob Upload") parses the
whole body and hashes its dag-cbor form: seconds of CPU for a large body.
It runs off the event loop, so the relay serves other requests meanwhile;
uploads at once each get their own answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from relay import create_relay
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client

from .conftest import World, start_world


@pytest.fixture
async def roomy_world() -> AsyncIterator[World]:
    relay = create_relay(MemoryStore())  # the default blob limit, 16 MiB
    async with relay.running(), asgi_client(relay.app) as client:
        yield await start_world(relay, client)


def many_empty_objects(count: int) -> bytes:
    return b"[" + b"{}," * (count - 1) + b"{}]"


async def test_other_requests_are_served_while_a_large_document_is_checked(
    roomy_world: World,
) -> None:
    w = roomy_world
    started = time.perf_counter()
    upload = asyncio.create_task(w.upload(w.alice, w.genesis, many_empty_objects(1_500_000)))
    await asyncio.sleep(0.05)
    answered: list[float] = []
    while not upload.done():
        assert (await w.client.get("/log")).status_code == 200
        answered.append(time.perf_counter() - started)
        await asyncio.sleep(0.02)
    response = await upload
    took = time.perf_counter() - started
    assert response.status_code == 400  # JSON, but not the document the op commits
    assert sum(1 for at in answered if at < took * 0.8) >= 3


async def test_uploads_at_once_each_get_their_answer(roomy_world: World) -> None:
    w = roomy_world
    answers = await asyncio.gather(
        w.upload(w.alice, w.genesis),
        w.upload(w.alice, w.alice_update, many_empty_objects(100_000)),
        w.upload(w.alice, w.alice_update),
    )
    assert [a.status_code for a in answers] == [200, 400, 200]
