"""``follow --since X --mode bootstrap``: a bootstrap starts at a snapshot
and takes no position (the relay answers 400 to ``since`` in bootstrap
mode, ``relay.feed.filters``), so the pair is a one-line usage error
naming both flags, not a --since silently ignored."""

from __future__ import annotations

import pytest

from .test_command_lines import assert_one_line_failure, run


@pytest.mark.parametrize(
    "argv",
    [["--since", "5", "--mode", "bootstrap"],
     ["--mode=bootstrap", "--since=e1.5"],
     ["--mode", "bootstrap", "--no-live", "--since", "0"]],
)  # fmt: skip
def test_follow_since_with_bootstrap_is_a_usage_error(argv: list[str]) -> None:
    done = run("follow", "http://127.0.0.1:9", *argv, "--retries", "0", timeout=30)
    line = assert_one_line_failure(done, "follow")
    assert done.returncode == 2, line
    assert "--since" in line and "bootstrap" in line
