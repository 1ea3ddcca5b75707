"""Under ``dfos-relay serve``, a large POST /operations body is parsed in the
relay's parse child (``relay.parse_pool``): it answers as inline parsing
would, and the child ends with the relay, SIGTERM or Ctrl-C, quietly."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from relay.parse_pool import OFF_LOOP_BYTES

from .conftest import RelayProcess


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status  # ended, not yet reaped by its (ended) parent


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["term", "ctrl-c"])
def test_a_large_body_is_answered_and_the_child_ends_with_the_relay(
    stop_signal: signal.Signals,
) -> None:
    relay = RelayProcess(["--store", "memory://"])
    # over OFF_LOOP_BYTES and many elements: parsed in the child
    body = b'{"operations": [], "x": [' + b"0," * (OFF_LOOP_BYTES // 2) + b"0]}"
    with relay.explained(), httpx.Client(base_url=relay.url, timeout=30) as client:
        response = client.post("/operations", content=body)
        assert (response.status_code, response.json()) == (
            400,
            {"error": "operations must not be empty"},
        )
        [child] = children(relay.proc.pid)
    if stop_signal == signal.SIGINT:
        relay.proc.send_signal(signal.SIGINT)
        os.kill(child, signal.SIGINT)  # a terminal sends it to the whole group
    code, out = relay.stop()
    deadline = time.monotonic() + 5
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert code == 0 and gone(child)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
