"""Bounded by design: a subscriber that stops reading is not buffered for
without end. Once the kernel's socket buffers are full, a send that waits
past the send timeout closes the stream; the consumer resumes from the last
event it received (``Last-Event-ID``), without loss or repetition."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket

import httpx

from relay import create_relay
from relay.config import RelayConfig
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS

from .conftest import read_sse


def _read_all(sock: socket.socket, timeout_s: float) -> bytes:
    sock.settimeout(timeout_s)
    chunks = []
    with contextlib.suppress(OSError):
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
    return b"".join(chunks)


async def _subscribers(http: httpx.AsyncClient, url: str) -> float:
    text = (await http.get(f"{url}/metrics")).text
    match = re.search(r'dfos_relay_feed_subscribers\{transport="sse"\} ([0-9.]+)', text)
    assert match
    return float(match.group(1))


async def test_a_consumer_that_stops_reading_is_closed_and_resumes_without_loss() -> None:
    relay = create_relay(MemoryStore(), config=RelayConfig(feed_send_timeout_s=0.5))
    async with serve_on_loopback(relay.app) as url:
        # ~6 MB of events: more than the kernel buffers of one connection hold
        await relay.ingest(mixed_workload(4500, seed=81, now_ms=PAST_MS))
        head = await relay.store.log_length()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
        sock.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        sock.sendall(b"GET /changes?since=0&live=true HTTP/1.1\r\nHost: relay\r\n\r\n")
        async with httpx.AsyncClient() as http:
            for _ in range(50):
                await asyncio.sleep(0.2)
                if await _subscribers(http, url) == 0:
                    break
            else:
                raise AssertionError("the stalled subscriber was never closed")
        received = await asyncio.to_thread(_read_all, sock, 5)
        sock.close()
        ids = re.findall(rb"\nid: ([0-9a-z]+\.[0-9]+)\r?\n", received)
        assert ids, "some events were delivered before the stall"
        last = ids[-1].decode()
        delivered = int(last.split(".")[1])
        assert delivered < head  # it was cut before the end
        resumed = await read_sse(url, "since=0", headers={"Last-Event-ID": last})
        rest = [e[1]["seq"] for e in resumed if e[0] == "op"]
        assert rest == list(range(delivered + 1, head + 1))
