"""A hostile peer as a raw HTTP/1.1 server on loopback: it answers every
request with bytes the test chooses (headers and body as written, or a
body trickled forever), which no well-behaved ASGI server would send."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_peer(answer: Answer) -> AsyncIterator[str]:
    """Serve ``answer`` after reading each request's head; yields the base URL."""

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        await answer(writer)

    async with _serve(respond) as url:
        yield url


@asynccontextmanager
async def routed_peer(routes: dict[str, Answer]) -> AsyncIterator[str]:
    """Like ``raw_peer``, answering a request whose path starts with a key of
    ``routes`` with that answer, and any other with a 404."""

    async def not_found(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")

    async def route(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        path = (await reader.readline()).split(b" ")[1:2] or [b""]
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        prefix = next((p for p in routes if path[0].decode("latin-1").startswith(p)), None)
        await (not_found if prefix is None else routes[prefix])(writer)

    async with _serve(route) as url:
        yield url


@asynccontextmanager
async def _serve(
    respond: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await respond(reader, writer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for task in tasks:
            task.cancel()
        server.close()
        await server.wait_closed()


def head(headers: dict[str, str]) -> bytes:
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"HTTP/1.1 200 OK\r\n{lines}\r\n".encode()


def encoded(body: bytes, encoding: str, content_type: str) -> Answer:
    """An answer of ``body`` as is, declared as ``content_type`` compressed
    by ``encoding`` (which it may or may not be)."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        headers = {
            "content-type": content_type,
            "content-encoding": encoding,
            "content-length": str(len(body)),
        }
        writer.write(head(headers) + body)

    return answer


def json_answer(document: object, delay_s: float = 0.0) -> Answer:
    """A 200 answer of ``document`` as JSON, after ``delay_s``."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(delay_s)
        body = json.dumps(document).encode()
        writer.write(head({"content-type": "application/json", "content-length": str(len(body))}))
        writer.write(body)
        await writer.drain()

    return answer


class Holding:
    """An answer that holds every request it gets; counts them, and the most at once."""

    def __init__(self) -> None:
        self.now = self.most = self.requests = 0

    async def __call__(self, writer: asyncio.StreamWriter) -> None:
        self.now += 1
        self.requests += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.Event().wait()  # until the test ends
        finally:
            self.now -= 1
