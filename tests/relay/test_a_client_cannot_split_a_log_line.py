"""A request path is quoted in the access log; whatever it holds, its JSON line
stays one line to any reader (Unicode line breaks and C1 controls included)
and reads back as the path the client sent."""

from __future__ import annotations

import json
import logging

import pytest

from relay.observability import JsonFormatter
from stores.memory import MemoryStore
from tests.support.served import TRANSPORTS, served_relay

# newline, NEL, LINE/PARAGRAPH SEPARATOR, 8-bit CSI (a terminal escape), DEL
HOSTILE_PATH = "/x%0Ay%C2%85z%E2%80%A8w%E2%80%A9v%C2%9B2Ju%7F"
DECODED = "/x\ny\x85z\u2028w\u2029v\x9b2Ju\x7f"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_hostile_path_stays_on_one_log_line(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dfos_relay.access")
    async with served_relay(MemoryStore(), transport) as served:
        assert (await served.client.get(HOSTILE_PATH)).status_code == 404
    [record] = [r for r in caplog.records if r.name == "dfos_relay.access"]
    line = JsonFormatter().format(record)
    assert line.splitlines() == [line]
    assert not any(0x7F <= ord(c) < 0xA0 for c in line)  # no DEL, no C1 control
    assert json.loads(line)["msg"] == f"GET {DECODED} 404"
