"""/readyz and /metrics answer in bounded time when the store stops answering
(a hung connection, a partitioned database): not ready, and the in-memory
series. Postgres is reached through a loopback TCP relay that the test
freezes: the shared server itself is never touched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from stores.postgres import PostgresStore
from tests.support.backends import PG_URL, pg_schema, selected_backends
from tests.support.served import TRANSPORTS, served_relay

PROBE_BOUND_S = 10.0  # above READY_TIMEOUT_S and METRICS_STORE_TIMEOUT_S

pytestmark = pytest.mark.skipif(
    "postgres" not in selected_backends(), reason="needs the Postgres backend"
)


class FreezableTcpRelay:
    """Forwards loopback connections to ``target``; ``freeze`` stops passing
    bytes (both ways, connections kept open), ``cut`` drops every connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: set[asyncio.Task[None]] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]
        for task in (self._pipe(reader, up_writer), self._pipe(up_reader, writer)):
            t = asyncio.create_task(task)
            self.tasks.add(t)
            t.add_done_callback(self.tasks.discard)

    def freeze(self) -> None:
        self.flowing.clear()

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.flowing.set()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[int]:
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        try:
            yield server.sockets[0].getsockname()[1]
        finally:
            self.cut()
            server.close()
            await server.wait_closed()


def pg_host_port() -> tuple[str, int]:
    authority = PG_URL.split("@", 1)[1].split("/", 1)[0]
    host, _, port = authority.rpartition(":")
    return host, int(port)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_probes_answer_while_the_store_hangs(transport: str) -> None:
    tcp = FreezableTcpRelay(pg_host_port())
    async with tcp.serving() as port, pg_schema() as schema:
        url = PG_URL.replace(f"{pg_host_port()[0]}:{pg_host_port()[1]}", f"127.0.0.1:{port}")
        store = PostgresStore(url, schema=schema, pool_max=4)
        async with served_relay(store, transport) as served:
            client = served.client
            assert (await client.get("/readyz")).status_code == 200
            tcp.freeze()
            try:
                answer = await asyncio.wait_for(client.get("/readyz"), PROBE_BOUND_S)
                assert answer.status_code == 503 and answer.json()["store"] == "unreachable"
                # while the first probe's store call still hangs: another
                # probe and a scrape, at once (one wait instead of two)
                again, scrape = await asyncio.wait_for(
                    asyncio.gather(client.get("/readyz"), client.get("/metrics")), PROBE_BOUND_S
                )
                assert again.status_code == 503
                assert scrape.status_code == 200
                assert "dfos_relay_http_request_duration_seconds" in scrape.text
                assert (await client.get("/healthz")).status_code == 200
            finally:
                tcp.cut()  # the relay's connections fail, so it stops at once
