"""``dfos-relay dump-log`` resumes an existing file only when it is a dump:
a file it cannot read, or whose last line is not a log entry, is one line
naming it (status 1) and is left exactly as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_command_lines import assert_one_line_failure, run

ENTRY = '{"cid":"bafyx","jwsToken":"t","kind":"artifact","chainId":"c"}\n'

# (a .gz dump torn mid-write is a dump: it resumes, see tests/spark/test_dumplog.py)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("not-json.jsonl", b"garbage\n"),
        ("not-an-entry.jsonl", b"[1, 2]\n"),
        ("no-cid.jsonl", ENTRY.encode() + b"{}\n"),
        ("not-utf8.jsonl", b"\xff\xfe\n"),
        ("not-gzip.jsonl.gz", ENTRY.encode()),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_resuming_a_file_that_is_not_a_dump_is_one_line(
    tmp_path: Path, name: str, content: bytes
) -> None:
    target = tmp_path / name
    target.write_bytes(content)
    before = target.read_bytes()
    # the relay is never reached: the file is read first
    done = run("dump-log", "http://127.0.0.1:9", "-o", str(target))
    line = assert_one_line_failure(done, "dump-log")
    assert str(target) in line and "--no-resume" in line
    assert target.read_bytes() == before
