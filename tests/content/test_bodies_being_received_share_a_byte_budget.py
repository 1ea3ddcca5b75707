"""The bytes of request bodies being received at once are bounded relay-wide
(``RelayConfig.receive_budget_bytes``, ``relay.receive_budget``): a body
holds what it has received. One whose Content-Length does not fit beside
that is answered at once 503 with ``Retry-After`` and the JSON error shape,
without its body, and a chunk that would go over the budget likewise, while
the uploads already arriving proceed; the budget is given back on every exit
(answered, refused, client gone mid-body). A client that declares a body and
trickles it holds only what it sent, and a small body (a usual batch of
operations) is never refused.

Through hypercorn on loopback, with raw sockets so a body can be held
half-sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from relay import Relay, RelayConfig, create_relay
from relay.receive_budget import RECEIVE_BUSY_RETRY_AFTER_S, SMALL_BODY_BYTES
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore

from .conftest import World, doc_bytes, start_world

UPLOADS = 2  # the budget holds this many bodies
SIZE = 2 * SMALL_BODY_BYTES  # each document is padded with spaces to this many bytes
BUDGET = UPLOADS * SIZE


def padded(w: World, size: int = SIZE) -> bytes:
    """The genesis document, ``size`` bytes long (trailing whitespace is JSON's)."""
    document = doc_bytes(w.docs[w.genesis])
    return document + b" " * (size - len(document))


@asynccontextmanager
async def world_with_budget(config: RelayConfig | None = None) -> AsyncIterator[tuple[World, int]]:
    """A world whose relay receives at most BUDGET body bytes at once, under
    hypercorn; with its port."""
    config = config or RelayConfig(receive_budget_bytes=BUDGET)
    relay = create_relay(MemoryStore(), config=config)
    async with (
        serve_on_loopback(relay.app) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        yield await start_world(relay, client), int(url.rsplit(":", 1)[1])


class RawUpload:
    """A ``PUT`` of the genesis document over its own connection, sent in parts."""

    def __init__(self, w: World, port: int, chunked: bool = False, size: int = SIZE) -> None:
        self.w, self.port, self.chunked = w, port, chunked
        self.body = padded(w, size)

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        framing = (
            "Transfer-Encoding: chunked" if self.chunked else f"Content-Length: {len(self.body)}"
        )
        head = (
            f"PUT /content/{self.w.chain.content_id}/blob/{self.w.genesis} HTTP/1.1\r\n"
            f"Host: relay\r\nAuthorization: {self.w.headers(self.w.alice)['Authorization']}\r\n"
            f"{framing}\r\n\r\n"
        )
        self.writer.write(head.encode())
        await self.writer.drain()

    async def send(self, data: bytes) -> None:
        if self.chunked:
            data = b"%x\r\n%s\r\n" % (len(data), data) if data else b"0\r\n\r\n"
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self) -> tuple[int, dict[str, str], dict[str, Any]]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 30)
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        body = await self.reader.readexactly(int(headers["content-length"]))
        return int(lines[0].split(" ")[1]), headers, json.loads(body)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not reached: {what}")


def held(relay: Relay) -> int:
    return relay.receiving.held


async def test_an_upload_over_the_budget_is_answered_503_without_its_body() -> None:
    async with world_with_budget() as (w, port):
        arriving = [RawUpload(w, port) for _ in range(UPLOADS)]
        for upload in arriving:  # each sends all but its last byte, and holds
            await upload.open()
            await upload.send(upload.body[:-1])
        await until(lambda: held(w.relay) == BUDGET - UPLOADS, "the uploads received")

        refused = RawUpload(w, port)
        await refused.open()  # its head only: answered without waiting for its body
        status, headers, body = await refused.answer()
        assert status == 503
        assert headers["retry-after"] == str(RECEIVE_BUSY_RETRY_AFTER_S)
        assert headers["connection"] == "close"  # its body unread: no other request on it
        assert body == {
            "error": f"too many request bodies being received (at most {BUDGET}"
            " bytes at once); retry later",
            "retryAfter": RECEIVE_BUSY_RETRY_AFTER_S,
        }
        await refused.close()
        # the budget is relay-wide: a large operations body is refused as well
        large = json.dumps({"operations": w.builder.tokens[:1]}) + " " * SMALL_BODY_BYTES
        posted = await w.client.post(
            "/operations", content=large, headers={"content-type": "application/json"}
        )
        assert posted.status_code == 503 and posted.json()["retryAfter"] == 1
        assert posted.headers["connection"] == "close"
        # and a small one is not: uploads filling the budget do not stop writes
        small = await w.client.post("/operations", json={"operations": w.builder.tokens[:1]})
        assert small.status_code == 200

        for upload in arriving:  # the uploads already arriving proceed
            await upload.send(upload.body[-1:])
            status, _, body = await upload.answer()
            assert status == 200, body
            await upload.close()
        assert held(w.relay) == 0
        again = await w.upload(w.alice, w.genesis, padded(w))
        assert again.status_code == 200  # and uploads go on


async def test_a_chunked_upload_is_refused_at_the_chunk_over_the_budget() -> None:
    async with world_with_budget() as (w, port):
        holding = RawUpload(w, port, size=SIZE + SIZE // 2)
        await holding.open()
        await holding.send(holding.body[:-1])
        await until(lambda: held(w.relay) == SIZE + SIZE // 2 - 1, "the first upload received")

        chunked = RawUpload(w, port, chunked=True)
        await chunked.open()
        await chunked.send(chunked.body[: SIZE // 4])  # fits beside the first
        await until(lambda: held(w.relay) == BUDGET - SIZE // 4 - 1, "the first chunk received")
        await chunked.send(chunked.body[SIZE // 4 :])  # would go over
        status, _, body = await chunked.answer()
        assert status == 503 and body["retryAfter"] == 1
        await chunked.close()
        await until(lambda: held(w.relay) == SIZE + SIZE // 2 - 1, "the chunked one gave back")

        await holding.send(holding.body[-1:])
        assert (await holding.answer())[0] == 200
        await holding.close()
        # a chunked upload within the budget is received as any other
        alone = RawUpload(w, port, chunked=True)
        await alone.open()
        await alone.send(alone.body[: SIZE // 2])
        await alone.send(alone.body[SIZE // 2 :])
        await alone.send(b"")
        assert (await alone.answer())[0] == 200
        await alone.close()
        assert held(w.relay) == 0


async def test_a_client_gone_mid_body_gives_its_bytes_back() -> None:
    async with world_with_budget() as (w, port):
        gone = [RawUpload(w, port) for _ in range(UPLOADS)]
        for upload in gone:
            await upload.open()
            await upload.send(upload.body[: SIZE // 2])
        await until(lambda: held(w.relay) == UPLOADS * SIZE // 2, "the uploads received")
        for upload in gone:
            await upload.close()
        await until(lambda: held(w.relay) == 0, "the budget given back")
        # the whole budget is free again: as many uploads at once as it holds
        answers = await asyncio.gather(
            *(w.upload(w.alice, w.genesis, padded(w)) for _ in range(UPLOADS))
        )
        assert [answer.status_code for answer in answers] == [200] * UPLOADS


async def test_a_body_refused_as_too_slow_or_too_large_gives_its_bytes_back() -> None:
    config = RelayConfig(receive_budget_bytes=BUDGET, body_grace_s=1.0, max_blob_bytes=SIZE)
    async with world_with_budget(config) as (w, port):
        slow = RawUpload(w, port)
        await slow.open()  # and sends nothing: 408 past the grace
        await slow.send(slow.body[:100])
        await until(lambda: held(w.relay) == 100, "the slow upload's first bytes received")
        assert (await slow.answer())[0] == 408
        await slow.close()
        assert held(w.relay) == 0

        large = RawUpload(w, port, chunked=True, size=SIZE + 1)
        await large.open()
        await large.send(large.body[: SIZE // 2])
        await until(lambda: held(w.relay) == SIZE // 2, "the first chunk received")
        await large.send(large.body[SIZE // 2 :])  # over the blob cap: 413
        assert (await large.answer())[0] == 413
        await large.close()
        assert held(w.relay) == 0


async def test_a_declared_body_trickled_in_holds_only_what_it_sent() -> None:
    """Declaring bodies as large as the budget and sending a few bytes (the
    body deadline lets that go on for long) does not lock others out."""
    async with world_with_budget() as (w, port):
        trickling = [RawUpload(w, port) for _ in range(UPLOADS)]
        for upload in trickling:
            await upload.open()
            await upload.send(upload.body[:100])
        await until(lambda: held(w.relay) == UPLOADS * 100, "the first bytes received")
        answer = await w.upload(w.alice, w.genesis, padded(w))
        assert answer.status_code == 200, answer.text
        for upload in trickling:
            await upload.close()
        await until(lambda: held(w.relay) == 0, "the budget given back")
