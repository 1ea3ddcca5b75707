"""A relay URL that can never be fetched (not http(s), no host, a bad
port, malformed) is one line and a failing status at once, for every
command that takes one: never a traceback, never a silent endless retry."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_command_lines import assert_one_line_failure, run

BAD_URLS = ["http://[::1", "http://127.0.0.1:abc", "http://127.0.0.1:99999", "ftp://x", "notaurl"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_dump_log_of_a_bad_url_is_one_line(url: str, tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    line = assert_one_line_failure(run("dump-log", url, "-o", str(target)), "dump-log")
    assert repr(url) in line and not target.exists()


@pytest.mark.parametrize("url", BAD_URLS)
def test_follow_of_a_bad_url_is_one_line(url: str) -> None:
    # without --retries a transport failure is retried forever: these never are
    line = assert_one_line_failure(run("follow", url, timeout=30), "follow")
    assert repr(url) in line


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc", "http://127.0.0.1:99999"])
def test_serve_with_a_bad_peer_url_is_a_usage_error(url: str) -> None:
    done = run("serve", "--store", "memory://", "--port", "9", "--peer", url, timeout=30)
    line = assert_one_line_failure(done, "serve")
    assert done.returncode == 2 and line.startswith("dfos-relay serve: error: --peer: ")
