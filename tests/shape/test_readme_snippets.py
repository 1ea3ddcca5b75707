"""Every snippet of README.md runs as shown: the Python blocks as files, the
shell blocks line by line in bash (with the venv's commands on PATH), against
a real relay served by ``dfos-relay serve``. The only edit is the relay's
port, 4444 in README, which becomes the test relay's free port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relay.testing.server import free_port
from relay.testing.workload import mixed_workload
from tests.cli.conftest import RelayProcess, clean_env

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
SETUP = ["./dev serve", "./dev test"]


def snippets(language: str) -> list[str]:
    text = README.read_text()
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def commands(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_setup_is_exactly_two_commands() -> None:
    first = snippets("sh")[0]
    assert [c.split("#")[0].strip() for c in commands(first)] == SETUP


@pytest.fixture(scope="module")
def relay() -> Iterator[RelayProcess]:
    process = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    yield process
    process.stop()


def _env(port: int) -> dict[str, str]:
    env = clean_env()
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


@pytest.mark.parametrize("index", range(len(snippets("python"))))
def test_python_snippet_runs_as_a_file(index: int, relay: RelayProcess, tmp_path: Path) -> None:
    block = snippets("python")[index].replace("4444", str(relay.port))
    name = re.match(r"# (\S+\.py)", block)
    script = tmp_path / (name.group(1) if name else f"snippet_{index}.py")
    script.write_text(block)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=_env(relay.port),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip()


@pytest.mark.spark
def test_shell_snippets_run_line_by_line_in_order(relay: RelayProcess, tmp_path: Path) -> None:
    """After set-up, the shell blocks in README order, in one directory, as a
    reader pastes them (dumps first, then the local and the cluster job)."""
    pytest.importorskip("pyspark")
    httpx.post(relay.url + "/operations", json={"operations": mixed_workload(20)}, timeout=30)
    for block in snippets("sh")[1:]:
        for line in commands(block.replace("4444", str(relay.port))):
            done = subprocess.run(
                ["bash", "-c", line], cwd=tmp_path, env=_env(relay.port),
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert done.returncode == 0, (line, done.stderr[-3000:])
    assert (tmp_path / "report.json").is_file()


def test_dev_serve_serves(tmp_path: Path) -> None:
    """The first set-up command, as a user runs it (install is a no-op here)."""
    port = free_port()
    proc = subprocess.Popen(
        ["./dev", "serve", "--port", str(port), "--store", f"sqlite:///{tmp_path}/dev.db"],
        cwd=ROOT, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300  # the first run installs into .venv
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("./dev serve did not become ready")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0
