"""``dfos-relay dump-log URL -o DIR`` names the mistake (the output is a
directory), before asking the relay anything, with or without
``--no-resume``: not advice to dump anew with ``--no-resume``, which fails
the same way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import DFOS_RELAY, clean_env
from .test_command_lines import assert_one_line_failure


@pytest.mark.parametrize("extra", [[], ["--no-resume"]], ids=["resume", "no-resume"])
def test_a_dump_into_a_directory(extra: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [DFOS_RELAY, "dump-log", "http://127.0.0.1:9", "-o", str(tmp_path), *extra],
        env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    line = assert_one_line_failure(done, "dump-log")
    assert done.returncode == 1
    assert line.endswith(f"{tmp_path} is a directory, not a file to write the log to"), line
    assert "--no-resume" not in line
