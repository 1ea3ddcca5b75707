"""A hostile peer or subscriber is bounded (time, bytes, rounds, memory) and
cut off, never able to stall the relay: over the changes feed's WebSocket.

What a client's messages cost the relay is bounded by the 64 KiB message
limit before the message is whole (a longer one closes the socket with
1009, message too big): an unfinished message, the rest of a refused one,
and a compressed frame alike. The socket's subscriptions end with the 1009,
even while the client ignores it. A socket that holds no subscription is closed
after the idle timeout; one that holds a quiet subscription is pinged at
the feed's heartbeat (and closed when it answers none:
``test_a_websocket_that_answers_no_ping_is_closed``). The memory checks
run against a real ``dfos-relay serve`` process, whose peak RSS they read."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import httpx
import pytest
import websockets
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, Request, TextMessage
from wsproto.extensions import PerMessageDeflate

from relay import create_relay
from relay.config import RelayConfig
from relay.http import changes_ws, ws_server
from relay.http.changes_ws import MAX_WS_MESSAGE_BYTES
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore
from tests.cli.conftest import RelayProcess

MiB = 1 << 20
PEAK_GROWTH_LIMIT = 24 * MiB  # well under what any of the attacks below cost unbounded


@asynccontextmanager
async def _relay_process() -> AsyncIterator[tuple[int, int]]:
    """A ``dfos-relay serve`` process on a memory store: (its port, its pid)."""
    # a short heartbeat: hypercorn's pinger keeps a closed socket until its next ping
    args = ["--store", "memory://", "--feed-heartbeat", "0.5", "--log-level", "warning"]
    served = RelayProcess(args)
    try:
        yield served.port, served.proc.pid
    finally:
        served.stop()


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _ws_open(port: int, deflate: bool = False) -> tuple[socket.socket, WSConnection]:
    """The handshake by hand (wsproto), so the test writes every frame itself."""
    sock = socket.create_connection(("127.0.0.1", port))
    client = WSConnection(ConnectionType.CLIENT)
    extensions = [PerMessageDeflate()] if deflate else []
    sock.sendall(client.send(Request(host="relay", target="/changes", extensions=extensions)))
    while not any(isinstance(e, AcceptConnection) for e in client.events()):
        client.receive_data(sock.recv(1 << 16))
    return sock, client


def _close_code(sock: socket.socket, client: WSConnection, timeout_s: float = 10) -> int | None:
    """The code of the close frame the relay sends (None: it sent none)."""
    sock.settimeout(timeout_s)
    with suppress(OSError):
        while data := sock.recv(1 << 16):
            client.receive_data(data)
            for event in client.events():
                if isinstance(event, CloseConnection):
                    return int(event.code)
    return None


def _masked_frame(payload: bytes, opcode: int, fin: bool, rsv1: bool = False) -> bytes:
    first = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", first, 0x80 | size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", first, 0x80 | 126, size)
    else:
        header = struct.pack("!BBQ", first, 0x80 | 127, size)
    return header + b"\0\0\0\0" + payload  # a zero mask leaves the payload as it is


def _deflated(size: int) -> bytes:
    """``size`` zero bytes, deflated as one permessage-deflate payload (~size/1000)."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunks = [deflater.compress(bytes(MiB)) for _ in range(size // MiB)]
    return b"".join(chunks) + deflater.flush(zlib.Z_SYNC_FLUSH)[:-4]


def _fragments(total: int) -> Iterator[bytes]:
    """One text message in 1 MiB fragments that never ends (no FIN)."""
    yield _masked_frame(b"x" * MiB, opcode=0x1, fin=False)
    for _ in range(total // MiB - 1):
        yield _masked_frame(b"x" * MiB, opcode=0x0, fin=False)


async def test_a_message_over_the_limit_closes_the_socket_as_too_big() -> None:
    relay = create_relay(MemoryStore())
    async with serve_on_loopback(relay.app) as url:
        ws_url = "ws" + url.removeprefix("http") + "/changes"
        async with websockets.connect(ws_url) as ws:
            await ws.send("[" + " " * MAX_WS_MESSAGE_BYTES + "]")
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        async with websockets.connect(ws_url) as ws:  # the relay goes on
            await ws.send(json.dumps(["CHANGES", "a", {}]))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))[2] == "STATUS"


def _until_eose(sock: socket.socket, client: WSConnection) -> None:
    sock.settimeout(10)
    text = ""
    while True:
        client.receive_data(sock.recv(1 << 16))
        for event in client.events():
            if isinstance(event, TextMessage):
                text += event.data
                if not event.message_finished:
                    continue
                frame, text = json.loads(text), ""
                if frame[2] == "EOSE":
                    return


def _hung_up(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the relay closes the connection (EOF) within ``timeout_s``."""
    sock.settimeout(timeout_s)
    with suppress(OSError):
        while sock.recv(1 << 16):
            pass
        return True
    return False


async def _websocket_subscribers(url: str) -> float:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    match = re.search(r'^dfos_relay_feed_subscribers\{transport="websocket"\} (\S+)$', text, re.M)
    assert match
    return float(match.group(1))


async def test_a_refused_message_ends_the_sockets_subscriptions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hypercorn sends the 1009 itself; the app must hear of it then, not
    when the client answers the close: one that never does (nor reads, nor
    hangs up) would hold its subscriber slots for good. The connection is
    closed ``CLOSE_LINGER_S`` later."""
    monkeypatch.setattr(ws_server, "CLOSE_LINGER_S", 1.0, raising=False)
    relay = create_relay(MemoryStore(), config=RelayConfig(feed_max_subscribers=1))
    async with serve_on_loopback(relay.app) as url:  # no pings: only the 1009 can end it
        sock, client = await asyncio.to_thread(_ws_open, int(url.rsplit(":", 1)[1]))
        request = json.dumps(["CHANGES", "quiet", {"live": True}])
        await asyncio.to_thread(sock.sendall, client.send(TextMessage(data=request)))
        await asyncio.to_thread(_until_eose, sock, client)
        assert await _websocket_subscribers(url) == 1
        too_big = client.send(TextMessage(data="[" + " " * MAX_WS_MESSAGE_BYTES + "]"))
        await asyncio.to_thread(sock.sendall, too_big)  # then it reads and answers nothing
        for _ in range(50):
            if await _websocket_subscribers(url) == 0:
                break
            await asyncio.sleep(0.1)
        assert await _websocket_subscribers(url) == 0
        ws_url = "ws" + url.removeprefix("http") + "/changes"
        async with websockets.connect(ws_url) as ws:  # its slot is free
            await ws.send(json.dumps(["CHANGES", "next", {}]))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))[2] == "STATUS"
        assert await asyncio.to_thread(_close_code, sock, client) == 1009
        assert await asyncio.to_thread(_hung_up, sock, 5)
        sock.close()


async def test_a_compressed_frame_cannot_inflate_past_the_limit() -> None:
    async with _relay_process() as (port, pid):
        before = _peak_rss(pid)
        sock, client = await asyncio.to_thread(_ws_open, port, True)
        bomb = _deflated(128 * MiB)  # ~128 KB on the wire
        await asyncio.to_thread(sock.sendall, _masked_frame(bomb, opcode=0x1, fin=True, rsv1=True))
        assert await asyncio.to_thread(_close_code, sock, client) == 1009
        sock.close()
        assert _peak_rss(pid) - before < PEAK_GROWTH_LIMIT


async def test_a_message_that_goes_on_past_its_refusal_is_not_kept() -> None:
    async with _relay_process() as (port, pid):
        before = _peak_rss(pid)
        sock, client = await asyncio.to_thread(_ws_open, port)
        sock.settimeout(20)
        for frame in _fragments(48 * MiB):  # past the limit, and past hypercorn's own 16 MiB
            with suppress(OSError):  # the relay may hang up first: fine
                await asyncio.to_thread(sock.sendall, frame)
        assert await asyncio.to_thread(_close_code, sock, client) == 1009
        sock.close()
        assert _peak_rss(pid) - before < PEAK_GROWTH_LIMIT


async def test_a_socket_without_a_subscription_is_closed_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(changes_ws, "IDLE_TIMEOUT_S", 0.5, raising=False)
    relay = create_relay(MemoryStore())
    async with serve_on_loopback(relay.app) as url:
        ws_url = "ws" + url.removeprefix("http") + "/changes"
        async with websockets.connect(ws_url) as idle:
            with pytest.raises(websockets.ConnectionClosedOK) as closed:
                await asyncio.wait_for(idle.recv(), 10)
        assert closed.value.rcvd is not None and "no subscription" in closed.value.rcvd.reason
        async with websockets.connect(ws_url) as ws:
            # a bad request does not count as a subscription; a live one does
            await ws.send(json.dumps(["CHANGES", "bad", {"mode": "nope"}]))
            await ws.send(json.dumps(["CHANGES", "live", {"live": True}]))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))[2] == "ERR"
            while json.loads(await asyncio.wait_for(ws.recv(), 10))[2] != "EOSE":
                pass
            await asyncio.sleep(1.5)  # three idle timeouts: it stays open while subscribed
            await ws.send(json.dumps(["CLOSE", "live"]))
            with pytest.raises(websockets.ConnectionClosedOK):
                while True:
                    await asyncio.wait_for(ws.recv(), 10)


def _pings_within(sock: socket.socket, client: WSConnection, seconds: float) -> int:
    """The pings received (each answered: a silent client is closed) in ``seconds``."""
    deadline = time.monotonic() + seconds
    pings = 0
    with suppress(OSError):
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            client.receive_data(sock.recv(1 << 16))
            for event in client.events():
                if isinstance(event, Ping):
                    pings += 1
                    sock.sendall(client.send(event.response()))
    return pings


async def test_a_quiet_subscription_is_pinged_at_the_heartbeat() -> None:
    """Nothing to send is no reason for silence: like the SSE heartbeat, the
    pings keep a quiet socket alive behind proxies, and a peer that vanished
    (a half-open connection) or stopped reading answers none of them."""
    async with _relay_process() as (port, _):  # a heartbeat of 0.5 s
        sock, client = await asyncio.to_thread(_ws_open, port)
        request = json.dumps(["CHANGES", "quiet", {"live": True}])
        await asyncio.to_thread(sock.sendall, client.send(TextMessage(data=request)))
        assert await asyncio.to_thread(_pings_within, sock, client, 2.5) >= 3
        sock.close()
