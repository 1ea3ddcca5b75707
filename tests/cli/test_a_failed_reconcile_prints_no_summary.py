"""``dfos-relay reconcile`` against a peer that is down or is not a relay
fails in one line that names the peer once, and prints no success summary
("reconciled everything ... in 1 round(s)") before it; ``--json`` still
prints the report, whose ``error`` says it failed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relay.testing.server import free_port

from .test_command_lines import assert_one_line_failure, run


@pytest.fixture
def not_a_relay(tmp_path: Path) -> Iterator[str]:
    """A plain static web server: no /sync/negentropy (POST answers 501)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait()


def _peer(kind: str, not_a_relay: str) -> str:
    return f"http://127.0.0.1:{free_port()}" if kind == "unreachable" else not_a_relay


@pytest.mark.parametrize("kind", ["unreachable", "not-a-relay"])
def test_a_failed_reconcile_prints_no_summary(kind: str, not_a_relay: str) -> None:
    peer = _peer(kind, not_a_relay)
    done = run("reconcile", peer, "--store", "memory://", timeout=60)
    line = assert_one_line_failure(done, "reconcile")
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert line.count(peer) == 1, line


@pytest.mark.parametrize("kind", ["unreachable", "not-a-relay"])
def test_a_failed_reconcile_with_json_reports_the_error(kind: str, not_a_relay: str) -> None:
    peer = _peer(kind, not_a_relay)
    done = run("reconcile", "--json", peer, "--store", "memory://", timeout=60)
    line = assert_one_line_failure(done, "reconcile")
    assert done.returncode == 1 and line.count(peer) == 1, line
    report = json.loads(done.stdout)
    assert report["peer"] == peer and report["error"]
