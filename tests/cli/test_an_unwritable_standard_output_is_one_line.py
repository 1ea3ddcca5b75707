"""Standard output that cannot be written (``> file`` on a full disk, here
``/dev/full``, or a descriptor closed with ``>&-``) ends a command with one
line naming the cause and status 1, never a traceback; a reader that went
away (``| head -1``) stays the quiet status 141."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import DFOS_RELAY, RelayProcess, clean_env
from .test_command_lines import assert_one_line_failure


def _run(args: list[str], **how: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DFOS_RELAY, *args], env=clean_env(), stderr=subprocess.PIPE, text=True, timeout=60,
        **how,  # type: ignore[call-overload]
    )  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/relay.db"
    made = _run(["feed", "reset-epoch", "--store", url], stdout=subprocess.DEVNULL)
    assert made.returncode == 0, made.stderr
    return url


def _to_dev_full(args: list[str]) -> subprocess.CompletedProcess[str]:
    with open("/dev/full", "w") as full:
        return _run(args, stdout=full)


def _with_stdout_closed(args: list[str]) -> subprocess.CompletedProcess[str]:
    return _run(args, preexec_fn=lambda: os.close(1))


@pytest.mark.parametrize("write", [_to_dev_full, _with_stdout_closed], ids=["full", "closed"])
@pytest.mark.parametrize("command", ["peers", "verify-store"])
def test_a_store_command_whose_output_cannot_be_written(
    command: str, write: object, store: str
) -> None:
    done = write([command, "--store", store])  # type: ignore[operator]
    line = assert_one_line_failure(done, command)
    assert done.returncode == 1
    assert "cannot write to standard output: " in line, line


@pytest.fixture(scope="module")
def relay() -> Iterator[RelayProcess]:
    """One relay for both ways of failing: follow only reads from it."""
    relay = RelayProcess(["--store", "memory://"])
    yield relay
    relay.stop()


@pytest.mark.parametrize("write", [_to_dev_full, _with_stdout_closed], ids=["full", "closed"])
def test_follow_whose_output_cannot_be_written(write: object, relay: RelayProcess) -> None:
    args = ["follow", relay.url, "--mode", "bootstrap", "--no-live"]
    done = write(args)  # type: ignore[operator]
    line = assert_one_line_failure(done, "follow")
    assert done.returncode == 1
    assert "cannot write to standard output: " in line, line
