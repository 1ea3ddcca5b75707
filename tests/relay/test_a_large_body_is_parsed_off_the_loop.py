"""A large POST /operations body is parsed off the event loop (in the relay's
parse child, ``relay.parse_pool``): while a hostile 4 MiB body is parsed,
other requests are answered and the loop never stalls for long; every body,
small or large, malformed or not, is answered exactly as when it was parsed
inline; a parse child that died costs no answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from relay import Relay, create_relay
from relay.config import DEFAULT_MAX_BODY_BYTES, MAX_OPERATIONS_PER_REQUEST
from relay.http.errors import ApiError
from relay.http.operations_body import parse_operations_body
from relay.parse_pool import OFF_LOOP_BYTES
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client
from tests.support.loop_stall import while_measuring_stalls
from tests.support.relay_api import PAST_MS

# 1.4 million empty objects, then a lone surrogate: orjson builds them all and
# refuses the surrogate, json builds them all again (~0.3 s inline here).
HOSTILE = b'{"operations":[' + b"{}," * ((DEFAULT_MAX_BODY_BYTES - 40) // 3) + b'{}],"x":"\\ud800"}'
# Inline, the loop stalled for the whole parse (over 150 ms) and answered no
# request meanwhile; off the loop it stalls for no more than scheduling noise
# on a busy two-core machine (the answers counted are the sharper test).
MAX_STALL_S = 0.12


def by_size_alone(relay: Relay) -> Relay:
    """``relay`` sending every body over ``OFF_LOOP_BYTES`` to its parse child,
    however few elements it holds (so that padding alone takes a body there)."""
    relay.parse_pool.off_loop_commas = -1
    return relay


# the shared ``client`` fixture (tests/conftest.py) reaches this relay
@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    relay = by_size_alone(create_relay(MemoryStore()))
    async with relay.running():
        yield relay


def padded(body: bytes) -> bytes:
    """``body`` with trailing whitespace (JSON allows it) past ``OFF_LOOP_BYTES``."""
    return body + b" " * (OFF_LOOP_BYTES + 1 - len(body))


async def test_requests_are_answered_while_a_large_body_is_parsed(
    relay: Relay, client: httpx.AsyncClient
) -> None:
    assert len(HOSTILE) <= DEFAULT_MAX_BODY_BYTES
    await client.post("/operations", content=padded(b"{}"))  # the child is up
    response, stalls = await while_measuring_stalls(
        client, client.post("/operations", content=HOSTILE)
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": f"at most {MAX_OPERATIONS_PER_REQUEST} operations per request"
    }
    assert len(stalls.answered) >= 3  # answered while the body was parsed
    assert stalls.longest < MAX_STALL_S


BODIES = {
    "not-json": b"{not json",
    "not-utf8": b"\xff\xfe",
    "array-not-object": b"[]",
    "missing-operations": b"{}",
    "operations-not-array": b'{"operations": "eyJ"}',
    "empty-array": b'{"operations": []}',
    "non-string-items": b'{"operations": [1, 2]}',
    "nested-too-deep": b'{"operations": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "over-100-items": json.dumps({"operations": ["x"] * (MAX_OPERATIONS_PER_REQUEST + 1)}).encode(),
    "json-only-lone-surrogate": b'{"operations": ["not-a-jws"], "x": "\\ud800"}',
    "well-formed": b'{"operations": ["not-a-jws"]}',
}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
async def test_a_large_body_is_answered_as_the_same_body_small(
    relay: Relay, client: httpx.AsyncClient, body: bytes
) -> None:
    small = await client.post("/operations", content=body)
    large = await client.post("/operations", content=padded(body))
    assert (large.status_code, large.json()) == (small.status_code, small.json())
    try:
        parse_operations_body(body)
    except ApiError as exc:  # the inline parser's own answer
        assert (small.status_code, small.json()) == (exc.status, {"error": exc.message})
    else:
        assert small.status_code == 200
    assert relay.parse_pool._child is not None  # the large one went to the child


async def test_a_dead_parse_child_costs_no_answer(relay: Relay, client: httpx.AsyncClient) -> None:
    body = padded(b'{"operations": []}')
    first = await client.post("/operations", content=body)
    child = relay.parse_pool._child
    assert child is not None
    child.kill()
    await child.wait()
    again = await client.post("/operations", content=body)  # parsed inline
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    then = await client.post("/operations", content=body)  # a new child
    assert (then.status_code, then.json()) == (first.status_code, first.json())
    assert relay.parse_pool._child is not None and relay.parse_pool._child is not child


async def test_the_parse_child_stops_with_the_relay() -> None:
    relay = by_size_alone(create_relay(MemoryStore()))
    async with relay.running():
        async with asgi_client(relay.app, base_url="http://r") as client:
            await client.post("/operations", content=padded(b"{}"))
        child = relay.parse_pool._child
        assert child is not None and child.returncode is None
    assert child.returncode == 0 and relay.parse_pool._child is None


async def test_an_ordinary_full_batch_is_parsed_inline() -> None:
    """A full batch of real tokens is over ``OFF_LOOP_BYTES`` but cheap to parse
    (a JWS compact string holds no comma): it pays no round trip to the child,
    while a body of many elements goes there."""
    tokens = mixed_workload(MAX_OPERATIONS_PER_REQUEST, seed=5, now_ms=PAST_MS)
    batch = json.dumps({"operations": tokens[:MAX_OPERATIONS_PER_REQUEST]}).encode()
    assert len(batch) > OFF_LOOP_BYTES
    relay = create_relay(MemoryStore())
    async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
        answer = await client.post("/operations", content=batch)
        assert answer.status_code == 200
        assert relay.parse_pool._child is None
        many = b'{"operations": [], "x": [' + b"0," * (OFF_LOOP_BYTES // 2) + b"0]}"
        assert len(many) > OFF_LOOP_BYTES
        answer = await client.post("/operations", content=many)
        assert answer.json() == {"error": "operations must not be empty"}
        assert relay.parse_pool._child is not None
