"""An uploaded document nests at most ``MAX_JSON_DEPTH`` (512) arrays and
objects deep, the bound of JWS payloads: at the bound it is stored, one
past it and far past it (100,000) it is answered 400 with a JSON error
(openapi.yaml: BadRequest), whatever stack checks it; never a 500 or a
verdict that depends on how much recursion the checking thread had left."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from relay import create_relay
from relay.content_plane import InvalidDocument, check_document
from relay.protocol import cid_of
from relay.protocol.jws import MAX_JSON_DEPTH
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client

from .conftest import World, ingest_more, start_world

VERY_DEEP = 100_000
PAST = 700  # past the bound, within what this test's own stack can hash


@pytest.fixture
async def memory_world() -> AsyncIterator[World]:
    relay = create_relay(MemoryStore())  # the default blob limit
    async with relay.running(), asgi_client(relay.app) as client:
        yield await start_world(relay, client)


def nested(depth: int) -> dict[str, Any]:
    """An object (one level) holding arrays nested to ``depth`` in all."""
    value: Any = []
    for _ in range(depth - 2):
        value = [value]
    return {"deep": value}


def deep_bytes(depth: int) -> bytes:
    return b'{"deep":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


async def commit(w: World, document: dict[str, Any]) -> str:
    """A content op by alice committing ``document``, ingested; its CID."""
    since = len(w.builder.tokens)
    op_cid = w.builder.content_update(w.other, document=document)
    await ingest_more(w, since)
    return op_cid


def test_the_byte_form_is_the_value_form() -> None:
    assert json.loads(deep_bytes(MAX_JSON_DEPTH)) == nested(MAX_JSON_DEPTH)


async def test_a_document_at_the_bound_is_stored(memory_world: World) -> None:
    w = memory_world
    op_cid = await commit(w, nested(MAX_JSON_DEPTH))
    response = await w.upload(w.alice, op_cid, deep_bytes(MAX_JSON_DEPTH), chain=w.other)
    assert response.status_code == 200, response.text
    assert response.json()["documentCID"] == cid_of(nested(MAX_JSON_DEPTH))


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, PAST])
async def test_a_document_past_the_bound_is_400_though_it_is_the_committed_one(
    memory_world: World, depth: int
) -> None:
    w = memory_world
    op_cid = await commit(w, nested(depth))  # a CID anyone can compute and commit to
    response = await w.upload(w.alice, op_cid, deep_bytes(depth), chain=w.other)
    assert response.status_code == 400
    assert response.json() == {
        "error": f"the document nests more than {MAX_JSON_DEPTH} arrays or objects deep"
    }
    assert (await w.download(w.alice, op_cid, chain=w.other)).status_code == 404


@pytest.mark.parametrize("shape", [b"[", b'{"a":'], ids=["arrays", "objects"])
async def test_a_very_deep_document_is_400_not_a_crash(memory_world: World, shape: bytes) -> None:
    w = memory_world
    body = shape * VERY_DEEP + b"1" + (b"]" if shape == b"[" else b"}") * VERY_DEEP
    response = await w.upload(w.alice, w.genesis, body)
    assert response.status_code == 400
    assert "nests more than" in response.json()["error"]
    assert (await w.client.get("/healthz")).status_code == 200


def _on_a_deep_stack(frames: int, call: Callable[[], object]) -> object:
    """``call()`` made ``frames`` Python frames deeper than here."""
    return call() if frames == 0 else _on_a_deep_stack(frames - 1, call)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, PAST])
async def test_the_verdict_is_the_same_on_every_stack(depth: int) -> None:
    """On the event loop's thread, a worker thread, or 300 frames down."""
    body, cid = deep_bytes(depth), cid_of(nested(depth))

    def verdict() -> str:
        try:
            check_document(body, cid)
        except InvalidDocument as exc:
            return str(exc)
        return "ok"

    expected = (
        "ok"
        if depth <= MAX_JSON_DEPTH
        else f"the document nests more than {MAX_JSON_DEPTH} arrays or objects deep"
    )
    assert verdict() == expected
    assert await asyncio.to_thread(verdict) == expected
    assert _on_a_deep_stack(300, verdict) == expected
