"""A client that hangs up halfway through its request body is the client's
doing: no error-level traceback in the relay's log, no 500 in its metrics."""

from __future__ import annotations

import asyncio
import logging

import pytest

from stores.memory import MemoryStore
from tests.cli.test_serve_command import metric
from tests.support.served import served_relay

ROUTES = ("/operations", "/operations/status", "/sync/negentropy", "/sync/operations")


async def hang_up_mid_body(port: int, path: str) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST %s HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n" % path.encode())
    writer.write(b'{"operations": [')
    await writer.drain()
    await asyncio.sleep(0.2)  # the handler is reading the body by now
    writer.close()
    await writer.wait_closed()


async def test_a_hang_up_mid_body_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with served_relay(MemoryStore(), "hypercorn") as served:
        port = int(str(served.client.base_url).rstrip("/").rsplit(":", 1)[1])
        for path in ROUTES:
            await hang_up_mid_body(port, path)
        await asyncio.sleep(0.5)
        text = (await served.client.get("/metrics")).text
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert metric(text, "dfos_relay_http_request_duration_seconds_count", status="500") == 0
    for path in ROUTES:  # each request was seen, and counted as the client's
        assert metric(text, "dfos_relay_http_request_duration_seconds_count", route=path) == 1
