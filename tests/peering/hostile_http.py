"""A hostile peer as a raw HTTP/1.1 server on loopback: it answers every
request with bytes the test chooses (headers and body as written, or a
body trickled forever), which no well-behaved ASGI server would send."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_peer(answer: Answer) -> AsyncIterator[str]:
    """Serve ``answer`` after reading each request's head; yields the base URL."""
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        with contextlib.suppress(Exception, asyncio.CancelledError):
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            await answer(writer)
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
