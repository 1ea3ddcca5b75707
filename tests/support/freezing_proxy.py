"""A loopback TCP proxy to the test Postgres server whose open connections
can be frozen: nothing more passes either way and nothing is closed, what a
network blip does to a connection (its peer hears nothing, and no socket
error tells it). Connections opened after a freeze pass as usual."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit


class FreezingProxy:
    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._open: list[asyncio.Event] = []  # per connection: set while it passes data
        self._pumps: set[asyncio.Task[None]] = set()
        self.port = 0
        self.accepted = 0  # connections opened through it (refused upstream or not)

    def freeze(self) -> None:
        """Stop every connection open now; later ones are not affected."""
        for passing in self._open:
            passing.clear()
        self._open = []

    async def cut(self) -> None:
        """Close every connection through the proxy (frozen or not)."""
        for task in list(self._pumps):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        passing = asyncio.Event()
        passing.set()
        self._open.append(passing)
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.get_running_loop().create_task(self._pump(src, dst, passing))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    @staticmethod
    async def _pump(
        src: asyncio.StreamReader, dst: asyncio.StreamWriter, passing: asyncio.Event
    ) -> None:
        try:
            while data := await src.read(65536):
                await passing.wait()  # frozen: held for ever, and the socket stays open
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[FreezingProxy]:
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            await self.cut()
            await server.wait_closed()


def through(proxy: FreezingProxy, url: str) -> str:
    """``url`` with its host and port those of ``proxy``."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    auth = netloc[0] + "@" if len(netloc) == 2 else ""
    return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{proxy.port}"))
