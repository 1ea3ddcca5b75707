"""``follow --retries N`` takes a count: a negative or fractional value is a
usage error (status 2) naming the flag, not a silent "give up at once"."""

from __future__ import annotations

import pytest

from .test_command_lines import assert_one_line_failure, run


@pytest.mark.parametrize("value", ["-1", "1.5", "abc", ""])
def test_follow_retries_must_be_a_count(value: str) -> None:
    done = run("follow", "http://127.0.0.1:9", f"--retries={value}")
    line = assert_one_line_failure(done, "follow")
    assert done.returncode == 2 and "--retries" in line and repr(value) in line
