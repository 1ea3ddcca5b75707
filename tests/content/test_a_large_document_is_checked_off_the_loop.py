"""A costly uploaded document is checked off the event loop, in the relay's
parse child (``relay.parse_pool``): a worker thread does not free the loop,
since the depth scan, the JSON parse and most of the dag-cbor encoding hold
the GIL. While a hostile document is checked, other requests are answered
and the loop never stalls for long; every document, valid or not, is
answered exactly as when it is checked on a thread; a parse child that died
costs no answer; an ordinary document never goes to the child."""

from __future__ import annotations

import asyncio
import codecs
import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from relay import Relay, create_relay
from relay.content_plane import InvalidDocument, check_document
from relay.parse_pool import OFF_LOOP_BYTES, OFF_LOOP_COMMAS
from relay.protocol import cid_of
from relay.protocol.jws import MAX_JSON_DEPTH
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client
from tests.support.loop_stall import while_measuring_stalls

from .conftest import World, doc_bytes, start_world

HOSTILE_BYTES = 4 * 1024 * 1024  # a quarter of the default blob cap keeps the test short


def empty_objects(size: int) -> bytes:
    """A JSON array of empty objects, ``size`` bytes at most."""
    return b"[" + b"{}," * ((size - 4) // 3) + b"{}]"


HOSTILE = {
    # ~1.4 million empty objects: depth scan, parse and encoding all cost
    "many-tiny-values": empty_objects(HOSTILE_BYTES),
    # no comma at all: the depth scan alone costs, by the bracket
    "open-brackets": b"[" * HOSTILE_BYTES,
}
# On a thread, the loop stalled for a whole C call of the check (0.25-1.5 s
# for these); in the child, for no more than scheduling noise on a busy
# two-core machine (up to ~0.14 s seen with the suite and other work
# sharing both cores).
MAX_STALL_S = 0.2


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    relay = create_relay(MemoryStore())  # the default blob cap, 16 MiB
    async with relay.running():
        yield relay


@pytest.fixture
async def world(relay: Relay) -> AsyncIterator[World]:
    async with asgi_client(relay.app) as client:
        yield await start_world(relay, client)


def all_to_the_child(relay: Relay) -> None:
    """Every document, however small or cheap, goes to the parse child."""
    relay.parse_pool.off_loop_bytes = -1
    relay.parse_pool.off_loop_commas = -1


def answer(response: httpx.Response) -> tuple[int, object]:
    return response.status_code, response.json()


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE.keys())
async def test_requests_are_answered_while_a_hostile_document_is_checked(
    world: World, body: bytes
) -> None:
    w = world
    warm = b"[" + b"0," * OFF_LOOP_BYTES + b"0]"  # costly: the child is up
    assert (await w.upload(w.alice, w.genesis, warm)).status_code == 400
    response, stalls = await while_measuring_stalls(w.client, w.upload(w.alice, w.genesis, body))
    assert response.status_code == 400  # JSON or not, not the committed document
    assert len(stalls.answered) >= 3  # answered while the document was checked
    assert stalls.longest < MAX_STALL_S
    assert w.relay.parse_pool._child is not None  # checked there


DOCUMENTS: dict[str, Callable[[World], bytes]] = {
    "the-committed-one": lambda w: doc_bytes(w.docs[w.genesis]),
    "pretty-with-a-bom": lambda w: codecs.BOM_UTF8 + doc_bytes(w.docs[w.genesis], pretty=True),
    "another-documents": lambda w: doc_bytes(w.docs[w.alice_update]),
    "utf16": lambda w: json.dumps(w.docs[w.genesis]).encode("utf-16"),
    "not-utf8": lambda w: b"\xff\xfe",
    "not-json": lambda w: b"{not json",
    "empty": lambda w: b"",
    "nested-too-deep": lambda w: b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
    "lone-surrogate": lambda w: b'["\\ud800"]',
    "nan": lambda w: b"[NaN]",
    "infinite-float": lambda w: b"[1e400]",
    "too-many-digits": lambda w: b"[" + b"1" * 5000 + b"]",
}


@pytest.mark.parametrize("name", DOCUMENTS)
async def test_a_document_is_answered_the_same_in_the_child_and_on_a_thread(
    world: World, name: str
) -> None:
    w = world
    body = DOCUMENTS[name](w)
    on_a_thread = await w.upload(w.alice, w.genesis, body)
    assert w.relay.parse_pool._child is None  # a small document stays off the child
    all_to_the_child(w.relay)
    in_the_child = await w.upload(w.alice, w.genesis, body)
    assert w.relay.parse_pool._child is not None
    assert answer(in_the_child) == answer(on_a_thread)
    try:
        check_document(body, cid_of(w.docs[w.genesis]))
    except InvalidDocument as exc:  # the check's own verdict
        assert answer(on_a_thread) == (400, {"error": str(exc)})
    else:
        assert on_a_thread.status_code == 200


async def test_a_dead_parse_child_costs_no_answer(world: World) -> None:
    w = world
    all_to_the_child(w.relay)
    body = doc_bytes(w.docs[w.alice_update])  # not the genesis document: 400
    first = await w.upload(w.alice, w.genesis, body)
    assert first.status_code == 400
    child = w.relay.parse_pool._child
    assert child is not None
    child.kill()
    await child.wait()
    again = await w.upload(w.alice, w.genesis, body)  # checked on a thread
    assert answer(again) == answer(first)
    valid = await w.upload(w.alice, w.genesis)  # a new child
    assert valid.status_code == 200
    assert w.relay.parse_pool._child is not None and w.relay.parse_pool._child is not child


async def test_a_child_killed_mid_check_costs_no_answer(world: World) -> None:
    w = world
    body = empty_objects(HOSTILE_BYTES // 2)  # ~0.5-1 s to check
    expected = (400, {"error": ""})
    try:
        check_document(body, cid_of(w.docs[w.genesis]))
    except InvalidDocument as exc:
        expected = (400, {"error": str(exc)})
    upload = asyncio.create_task(w.upload(w.alice, w.genesis, body))
    async with asyncio.timeout(5):
        while w.relay.parse_pool._child is None:  # the body is on its way there
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    child = w.relay.parse_pool._child
    assert not upload.done()
    child.kill()
    assert answer(await upload) == expected  # checked again, on a thread


async def test_an_ordinary_document_is_checked_on_a_thread(world: World) -> None:
    """A large document of few values (a long text) is cheap to check: it
    pays no round trip to the child, while one of many values goes there."""
    w = world
    text = b'{"text": "' + b"a" * (2 * OFF_LOOP_BYTES) + b'"}'
    assert (await w.upload(w.alice, w.genesis, text)).status_code == 400
    assert (await w.upload(w.alice, w.genesis)).status_code == 200
    assert w.relay.parse_pool._child is None
    values = b"[" + b"[]," * OFF_LOOP_COMMAS + b"[]]"  # few commas but as many brackets
    padded = values + b" " * (OFF_LOOP_BYTES - len(values) + 1)
    assert padded.count(b",") == OFF_LOOP_COMMAS and len(padded) > OFF_LOOP_BYTES
    assert (await w.upload(w.alice, w.genesis, padded)).status_code == 400
    assert w.relay.parse_pool._child is not None
