"""``serve --workers N`` is bounded (``MAX_WORKERS``): a huge N would
start that many processes. Beyond the bound it is a one-line usage error
(status 2) naming the flag or variable, before anything starts."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.settings import MAX_WORKERS, parse_settings

from .conftest import DFOS_RELAY, clean_env
from .test_command_lines import assert_one_line_failure


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port already listened on: were the workers started, serving would
    fail there instead (status 1), never spawning them."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("value", [str(MAX_WORKERS + 1), "100000", "10" * 20])
@pytest.mark.parametrize("via", ["flag", "env"])
def test_serve_workers_has_an_upper_bound(
    value: str, via: str, taken_port: int, tmp_path: Path
) -> None:
    args = ["serve", "--store", f"sqlite:///{tmp_path / 'r.db'}", "--port", str(taken_port)]
    env = {"DFOS_RELAY_WORKERS": value} if via == "env" else {}
    if via == "flag":
        args += ["--workers", value]
    done = subprocess.run(
        [DFOS_RELAY, *args], env=clean_env(env), capture_output=True, text=True, timeout=60
    )
    line = assert_one_line_failure(done, "serve")
    name = "--workers" if via == "flag" else "DFOS_RELAY_WORKERS"
    assert done.returncode == 2 and line.split("error: ", 1)[1].startswith(f"{name}: "), line
    assert f"1..{MAX_WORKERS}" in line and repr(value) in line


def test_the_bound_itself_is_accepted() -> None:
    raw = {"DFOS_RELAY_WORKERS": str(MAX_WORKERS), "DFOS_RELAY_STORE": "sqlite:///r.db"}
    assert parse_settings(raw).workers == MAX_WORKERS
