"""The reconciliation routes, in-process and through hypercorn on every
store: one Negentropy round per POST, windows, the frame limit, ops by CID
in transfer order, and bad input answered with a JSON 4xx (or the V1
downgrade reply) that leaves nothing behind."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from relay import Relay, RelayConfig, create_relay
from relay.protocol.negentropy import Negentropy, NegentropyOptions, VectorStorage, id_from_cid
from relay.protocol.timestamps import parse_timestamp
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, log_cids, post

OCTET = {"content-type": "application/octet-stream"}


@pytest.fixture(params=["in-process", "hypercorn"])
async def http(
    request: pytest.FixtureRequest, store: RelayStore
) -> AsyncIterator[httpx.AsyncClient]:
    relay = create_relay(store, config=RelayConfig(sync_max_message_bytes=64 * 1024))
    if request.param == "in-process":
        async with (
            relay.running(),
            asgi_client(relay.app) as c,
        ):
            yield c
    else:
        async with (
            serve_on_loopback(relay.app) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as c,
        ):
            yield c


def workload() -> WorkloadBuilder:
    b = WorkloadBuilder(seed=7, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    b.beacon(bob)
    b.countersign(bob, chain.ops[0][0])
    b.artifact(alice)
    return b


async def log_entries(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await http.get("/log", params={"limit": 1000})
    assert response.json()["cursor"] is None
    entries: list[dict[str, Any]] = response.json()["entries"]
    return entries


def created_at_ms(token: str) -> int:
    payload = token.split(".")[1]
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return parse_timestamp(data["createdAt"])


async def items_of(http: httpx.AsyncClient) -> list[tuple[int, bytes]]:
    """The relay's log as Negentropy items."""
    return [(created_at_ms(e["jwsToken"]), id_from_cid(e["cid"])) for e in await log_entries(http)]


async def run_rounds(
    http: httpx.AsyncClient, ours: list[tuple[int, bytes]], params: dict[str, str] | None = None
) -> tuple[set[bytes], set[bytes], int]:
    client = Negentropy(VectorStorage(ours), NegentropyOptions())
    message: bytes | None = client.initiate()
    have: set[bytes] = set()
    need: set[bytes] = set()
    rounds = 0
    while message is not None:
        rounds += 1
        response = await http.post(
            "/sync/negentropy", content=message, headers=OCTET, params=params
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/octet-stream"
        step = client.step(response.content)
        have.update(step.have)
        need.update(step.need)
        message = step.message
    return have, need, rounds


async def test_well_known_advertises_negentropy_v1(http: httpx.AsyncClient) -> None:
    sync = (await http.get("/.well-known/dfos-relay")).json()["sync"]
    assert sync["negentropy"] == 1 and sync["maxOperationCids"] == 1000
    assert sync["scopes"] == {"maxMembers": 200}
    assert sync["maxMessageBytes"] == 64 * 1024


async def test_rounds_find_what_each_side_lacks(http: httpx.AsyncClient) -> None:
    b = workload()
    await post(http, b.tokens[:5])
    relay_items = await items_of(http)
    extra = (PAST_MS, random.Random(1).randbytes(32))
    ours = [*relay_items[1:], extra]
    have, need, _ = await run_rounds(http, ours)
    assert have == {extra[1]}
    assert need == {relay_items[0][1]}
    # identical sets: one round
    assert await run_rounds(http, relay_items) == (set(), set(), 1)


async def test_a_window_limits_both_sides_to_a_createdat_range(http: httpx.AsyncClient) -> None:
    b = workload()
    await post(http, b.tokens)
    relay_items = sorted(await items_of(http))
    cut = relay_items[len(relay_items) // 2][0]
    # we hold nothing: inside [cut, inf) we need exactly the relay's items there
    have, need, _ = await run_rounds(http, [], {"since": str(cut)})
    assert need == {i for t, i in relay_items if t >= cut}
    have, need, _ = await run_rounds(http, [], {"since": "0", "until": str(cut)})
    assert need == {i for t, i in relay_items if t < cut} and not have


async def test_ops_by_cid_come_in_transfer_order(http: httpx.AsyncClient) -> None:
    b = workload()
    await post(http, b.tokens)
    entries = await log_entries(http)
    kind_of = {e["jwsToken"]: e["kind"] for e in entries}
    unknown = "bafyreiafszluq47yac2nxegvrqd64hoy5oeydra346e2jp67gtx73l4lzu"
    asked = [e["cid"] for e in reversed(entries)] + [unknown]
    body = (await http.post("/sync/operations", json={"cids": asked})).json()
    assert body["missing"] == [unknown]
    assert sorted(body["operations"]) == sorted(kind_of)
    rank = {"identity-op": 0, "beacon": 1, "artifact": 1, "content-op": 2, "countersign": 3}
    ranks = [rank[kind_of[t]] for t in body["operations"]]
    assert ranks == sorted(ranks)
    log_order = [e["jwsToken"] for e in entries]
    same_kind = [t for t in body["operations"] if kind_of[t] == "content-op"]
    assert same_kind == [t for t in log_order if kind_of[t] == "content-op"]


@pytest.mark.parametrize(
    ("body", "params", "status"),
    [(b"\x61\x81", None, 400),  # bad varint
     (b"\x61\x05\x02", None, 400),  # truncated bound
     (b"\x61\x06\x01\xbb\x00\x01\x01\xaa\x00", None, 400),  # out-of-order bounds
     (b"\x61\x00\x00\x02\x02" + bytes(40), None, 400),  # id list shorter than declared
     (b"", None, 400),
     (b"\x61", {"since": "yesterday"}, 400),
     (b"\x61", {"since": "10", "until": "5"}, 400),
     (b"\x61", {"frameLimit": "100"}, 400),
     (b"\x61" + bytes(70 * 1024), None, 413)],
)  # fmt: skip
async def test_bad_negentropy_requests_get_a_json_error(
    http: httpx.AsyncClient, body: bytes, params: dict[str, str] | None, status: int
) -> None:
    response = await http.post("/sync/negentropy", content=body, headers=OCTET, params=params)
    assert response.status_code == status
    assert isinstance(response.json()["error"], str)
    # nothing was left behind: the relay still answers a clean round
    assert (await run_rounds(http, await items_of(http)))[2] == 1


async def test_an_unknown_protocol_version_gets_the_downgrade_reply(
    http: httpx.AsyncClient,
) -> None:
    response = await http.post("/sync/negentropy", content=b"\x62\x00\x00\x00", headers=OCTET)
    assert (response.status_code, response.content) == (200, b"\x61")


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b"[" * 5000 + b"]" * 5000,
        b'{"cids": "x"}',
        b'{"cids": ["not-a-cid"]}',
        b'{"cids": [1]}',
    ],
)
async def test_bad_operation_fetches_get_400(http: httpx.AsyncClient, body: bytes) -> None:
    response = await http.post("/sync/operations", content=body)
    assert response.status_code == 400 and "error" in response.json()


async def test_more_than_1000_cids_is_400(http: httpx.AsyncClient) -> None:
    cid = "bafyreiafszluq47yac2nxegvrqd64hoy5oeydra346e2jp67gtx73l4lzu"
    response = await http.post("/sync/operations", json={"cids": [cid] * 1001})
    assert response.status_code == 400 and "1000" in response.json()["error"]


async def test_the_reply_respects_the_clients_frame_limit(store: RelayStore) -> None:
    relay: Relay = create_relay(store)
    b = WorkloadBuilder(seed=8, start_ms=PAST_MS)
    for _ in range(200):  # 200 ids of 32 bytes do not fit one 4 KiB frame
        b.identity()
    async with (
        relay.running(),
        asgi_client(relay.app, base_url="http://r.test") as http,
    ):
        for at in range(0, len(b.tokens), 100):
            await post(http, b.tokens[at : at + 100])
        client = Negentropy(VectorStorage([]), NegentropyOptions(frame_size_limit=4096))
        message: bytes | None = client.initiate()
        need: set[bytes] = set()
        rounds = 0
        while message is not None:
            rounds += 1
            reply = await http.post(
                "/sync/negentropy", content=message, headers=OCTET, params={"frameLimit": "4096"}
            )
            assert len(reply.content) <= 4096
            step = client.step(reply.content)
            need.update(step.need)
            message = step.message
        assert rounds > 1 and len(need) == len(await log_cids(http))
