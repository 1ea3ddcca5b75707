"""POST /operations input handling (openapi.yaml ``IngestRequest``): malformed
bodies are 400 JSON errors, oversized bodies 413, unknown routes and methods
JSON 404/405; a malformed token inside a batch is rejected on its own line
while the rest proceed; no input yields a 500."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay import RelayConfig, create_relay
from relay.config import MAX_OPERATIONS_PER_REQUEST
from relay.protocol import sign_operation
from relay.testing.workload import WorkloadBuilder, mixed_workload
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.backends import make_store, selected_backends
from tests.support.relay_api import PAST_MS, get_json, post, statuses


def _assert_json_error(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{not json", id="invalid-json"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(b"", id="empty-body"),
        pytest.param(b"[]", id="array-not-object"),
        pytest.param(b'"operations"', id="string"),
        pytest.param(b"{}", id="missing-operations"),
        pytest.param(b'{"operations": "eyJ"}', id="operations-not-array"),
        pytest.param(b'{"operations": null}', id="operations-null"),
        pytest.param(b'{"operations": []}', id="empty-array"),
        pytest.param(b'{"operations": [1, 2]}', id="non-string-items"),
        pytest.param(b'{"operations": ["a", {"x": 1}]}', id="mixed-item-types"),
        pytest.param(b'{"operations": ' + b"[" * 5000 + b"]" * 5000 + b"}", id="nested-too-deep"),
        pytest.param(
            json.dumps({"operations": ["x"] * (MAX_OPERATIONS_PER_REQUEST + 1)}).encode(),
            id="over-100-items",
        ),
    ],
)
async def test_bad_body_is_a_400_json_error(client: httpx.AsyncClient, body: bytes) -> None:
    response = await client.post(
        "/operations", content=body, headers={"content-type": "application/json"}
    )
    _assert_json_error(response, 400)


async def test_exactly_100_items_is_accepted(client: httpx.AsyncClient) -> None:
    results = await post(client, ["not-a-jws"] * MAX_OPERATIONS_PER_REQUEST)
    assert set(statuses(results)) == {"rejected"}


async def test_body_over_the_configured_cap_is_413(store: RelayStore) -> None:
    relay = create_relay(store, config=RelayConfig(max_body_bytes=1024))
    async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
        big = json.dumps({"operations": ["x" * 2000]})
        _assert_json_error(await client.post("/operations", content=big), 413)
        small = await client.post("/operations", json={"operations": ["x" * 100]})
        assert small.status_code == 200


@pytest.mark.parametrize("path", ["/operations", "/operations/status"])
async def test_a_content_length_too_long_to_read_is_no_500(
    client: httpx.AsyncClient, path: str
) -> None:
    # more digits than int() converts: the declared length is not believed,
    # the body read is capped as ever
    headers = {"content-type": "application/json", "content-length": "9" * 5000}
    response = await client.post(path, content=b"{}", headers=headers)
    _assert_json_error(response, 400)


async def test_unknown_route_is_a_json_404(client: httpx.AsyncClient) -> None:
    _assert_json_error(await client.get("/no/such/route"), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/operations"), ("PUT", "/operations"), ("POST", "/log"), ("DELETE", "/identities/x")],
)
async def test_wrong_method_is_a_json_405(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    _assert_json_error(await client.request(method, path), 405)


async def test_malformed_token_is_rejected_on_its_own_line(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=11, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    good = list(b.tokens)
    batch = [good[0], "not.a.jws", "x", good[1], good[0][:-3] + "AAA", "a.b"]
    results = await post(client, batch)
    assert statuses(results) == ["new", "rejected", "rejected", "new", "rejected", "rejected"]
    for r in (results[1], results[2], results[5]):
        assert r["error"]
    assert results[3]["chainId"] == chain.content_id


async def test_a_token_that_is_not_text_is_rejected_on_its_own_line(
    client: httpx.AsyncClient,
) -> None:
    """JSON can carry a lone surrogate (``"\\ud800"``), which no UTF-8 encoder
    takes: that line is malformed, and the lines around it are answered."""
    b = WorkloadBuilder(seed=12, start_ms=PAST_MS)
    alice = b.identity()
    b.content_create(alice)
    genesis, content = b.tokens
    head, payload, signature = content.split(".")
    lines = [json.dumps(genesis), '"\\ud800"', f'"{head}.{payload}.{signature}\\udc80"']
    body = '{"operations": [' + ", ".join([*lines, json.dumps(content)]) + "]}"
    response = await client.post("/operations", content=body.encode())
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert statuses(results) == ["new", "rejected", "rejected", "new"]
    assert results[1]["error"] == results[2]["error"] == "malformed token: JWS token must be ASCII"


def _segment(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda text: text[:-1] + ', "x\\ud800": 1}', id="payload-key"),
        pytest.param(lambda text: text.replace('"did:dfos:', '"a\\udc80b', 1), id="did"),
        pytest.param(  # a long number sends the segment past orjson
            lambda text: text[:-1] + ', "n": ' + "9" * 80 + ', "y": "\\ud800"}', id="slow-path"
        ),
    ],
)
async def test_a_lone_surrogate_inside_a_token_is_malformed_on_its_own_line(
    client: httpx.AsyncClient, spoil: Callable[[str], str]
) -> None:
    """The token is ASCII, but its JSON names a lone surrogate (``\\ud800``):
    no UTF-8 and no dag-cbor encoding takes such a string, so it is
    malformed, and the line after it is answered."""
    b = WorkloadBuilder(seed=13, start_ms=PAST_MS)
    b.beacon(b.identity())
    genesis, beacon = b.tokens
    head, payload, signature = beacon.split(".")
    text = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    spoilt = f"{head}.{_segment(spoil(text).encode())}.{signature}"
    results = await post(client, [genesis, spoilt, beacon])
    assert statuses(results) == ["new", "rejected", "new"]
    assert results[1]["reason"] == "malformed"


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_tokenish = st.builds(
    lambda a, b, c: f"{a}.{b}.{c}",
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=", max_size=40),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", max_size=40),
    st.text(max_size=10),
)
_bodies = st.one_of(
    st.binary(max_size=64),
    _json_values.map(lambda v: json.dumps(v).encode()),
    st.lists(st.one_of(_tokenish, _json_values), max_size=5).map(
        lambda ops: json.dumps({"operations": ops}).encode()
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(body=_bodies)
async def test_no_input_yields_a_500(client: httpx.AsyncClient, body: bytes) -> None:
    response = await client.post("/operations", content=body)
    assert response.status_code in (200, 400, 413), response.text
    assert isinstance(response.json(), dict)


@pytest.mark.parametrize("field", ["x\x00", "a\x00b"], ids=["trailing", "inside"])
async def test_a_field_name_holding_nul_is_malformed_on_its_own_line(
    client: httpx.AsyncClient, field: str
) -> None:
    """An unknown field is named in the rejection, which the store keeps: a
    name holding NUL (no Postgres text holds one) was a 500 for the batch."""
    b = WorkloadBuilder(seed=14, start_ms=PAST_MS)
    alice = b.identity()
    b.artifact(alice)
    genesis, artifact = b.tokens
    typ, payload, kid = _signed_parts(artifact)
    spoilt = sign_operation(typ, {**payload, field: 1}, alice.keypair, kid).token
    results = await post(client, [genesis, spoilt, artifact])
    assert statuses(results) == ["new", "rejected", "new"]
    assert results[1]["reason"] == "malformed"
    assert "\x00" not in results[1]["error"]
    # the same token sent again is answered from the stored rejection
    again = await post(client, [spoilt])
    assert statuses(again) == ["rejected"]


async def test_a_chain_whose_document_cid_holds_nul_takes_more_ops(
    client: httpx.AsyncClient,
) -> None:
    """``documentCID`` is any string of at most 256 characters (PROTOCOL.md
    "Operation Field Limits"), NUL included; the chain state holding it must
    not fail the reads of the batches that touch the chain after it."""
    b = WorkloadBuilder(seed=15, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    genesis, create, update = b.tokens
    typ, payload, kid = _signed_parts(update)
    nul = sign_operation(typ, {**payload, "documentCID": "a\x00b"}, alice.keypair, kid)
    assert statuses(await post(client, [genesis, create, nul.token])) == ["new"] * 3
    b.tokens.clear()
    chain.head_cid = nul.cid
    after = b.content_update(chain)
    assert statuses(await post(client, b.tokens)) == ["new"]
    state = await get_json(client, f"/content/{chain.content_id}")
    assert state["headCID"] == after


def _signed_parts(token: str) -> tuple[str, dict[str, object], str]:
    """The ``typ``, payload and ``kid`` of a signed token, to sign a variant."""
    head, payload, _ = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return header["typ"], body, header["kid"]


@pytest.mark.parametrize("backend", selected_backends())
async def test_a_deeply_nested_token_has_one_verdict_alone_and_in_a_batch(
    backend: str, tmp_path: Path
) -> None:
    """A batch of 64 ops or more is prechecked on worker threads, whose stacks
    are shallower than the event loop's: a payload nested past the limit was
    accepted there and malformed alone (a permanent rejection), so relays
    disagreed on it by how it reached them."""
    b = WorkloadBuilder(seed=16, start_ms=PAST_MS)
    alice = b.identity()
    b.artifact(alice)
    genesis, artifact = b.tokens
    typ, payload, kid = _signed_parts(artifact)
    content = {**payload["content"], "x": _nested(980)}  # type: ignore[dict-item]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)  # only to sign it (its CID)
    try:
        deep = sign_operation(typ, {**payload, "content": content}, alice.keypair, kid).token
    finally:
        sys.setrecursionlimit(limit)
    verdicts = []
    for i, batch in enumerate([[genesis, deep], [genesis, deep, *mixed_workload(70, seed=16)]]):
        (tmp_path / str(i)).mkdir()
        async with make_store(backend, tmp_path / str(i)) as store:
            relay = create_relay(store)
            async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
                results = await post(client, batch)
        assert statuses(results[:1] + results[2:]) == ["new"] * (len(batch) - 1)
        verdicts.append((results[1]["status"], results[1].get("reason")))
    assert verdicts == [("rejected", "malformed")] * 2


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value
