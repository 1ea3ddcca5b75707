"""``dfos-relay dump-log --no-resume`` replaces a dump only once the relay
answers: a relay that cannot be reached (or answers no log page) leaves the
existing file byte for byte as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_command_lines import assert_one_line_failure, run

ENTRY = '{"cid":"bafyx","jwsToken":"t","kind":"artifact","chainId":"c"}\n'


@pytest.mark.parametrize("name", ["log.jsonl", "log.jsonl.gz"])
def test_a_failed_dump_without_resume_keeps_the_previous_dump(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    target.write_bytes(ENTRY.encode() * 3)
    before = target.read_bytes()
    done = run("dump-log", "http://127.0.0.1:9", "-o", str(target), "--no-resume")
    assert_one_line_failure(done, "dump-log")
    assert target.read_bytes() == before
