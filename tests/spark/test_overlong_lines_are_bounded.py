"""spark.lines: a dump line longer than MAX_LINE_BYTES is bounded and named.

Hadoop's LineRecordReader keeps at most the limit of a line in memory (the
``READ_OPTIONS`` reach it through Spark's JSON and text readers) and skips
a longer line silently, so the job counts and names such lines instead: exit
2 with file and line. The test line is 64 MB, sixteen times the limit."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import EXIT_BAD_INPUT, EXIT_DIVERGED, run_convergence

from .relays import one_relay_dump

pytestmark = pytest.mark.spark

HUGE = 64 * 1024 * 1024
LIMIT = 4 * 1024 * 1024  # spark.lines.MAX_LINE_BYTES, as documented


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("overlong"), seed=33)


def with_line(dump: Path, at: int, line: str) -> bytes:
    """``dump``'s lines with ``line`` inserted as line ``at``."""
    lines = dump.read_text().splitlines()
    lines.insert(at - 1, line)
    return ("\n".join(lines) + "\n").encode()


def huge_entry(dump: Path, size: int) -> str:
    """A well-formed entry of ``size`` bytes or more: read whole, it was one
    more (bogus) op of the relay, not bad input."""
    entry = json.loads(dump.read_text().splitlines()[0])
    return json.dumps({**entry, "cid": "bafy" + "k" * size})


@pytest.mark.parametrize("at", [2, 5], ids=["early", "later"])
def test_a_64mb_line_is_named_by_file_and_line(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], at: int
) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(with_line(dump, at, huge_entry(dump, HUGE)))
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}:{at}: line longer than {LIMIT} bytes (relay b)"


def test_a_64mb_line_in_a_gzip_dump_is_named(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "b.jsonl.gz"
    bad.write_bytes(gzip.compress(with_line(dump, 3, huge_entry(dump, HUGE)), compresslevel=1))
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}:3: line longer than {LIMIT} bytes (relay b)"


def test_several_overlong_lines_are_counted(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "b.jsonl"
    long = "x" * (LIMIT + 1)
    lines = dump.read_text().splitlines()
    bad.write_text("\n".join([lines[0], *([long] * 7), *lines[1:]]) + "\n")
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    named = "; ".join(f"{bad}:{n}: line longer than {LIMIT} bytes (relay b)" for n in range(2, 7))
    assert err == f"error: {named} (7 such lines in the file)"


def test_a_line_at_the_limit_is_read(spark: Any, dump: Path, tmp_path: Path) -> None:
    """A line of exactly the limit (line end excluded) is an entry."""
    line = huge_entry(dump, 0)
    line = huge_entry(dump, LIMIT - len(line))
    assert len(line.encode()) == LIMIT
    b = tmp_path / "b.jsonl"
    b.write_bytes(with_line(dump, 2, line))
    assert run_convergence(["--quiet", f"a={dump}", f"b={b}"], spark=spark) == EXIT_DIVERGED


def test_the_reader_keeps_no_more_than_the_limit_of_a_line(
    spark: Any, dump: Path, tmp_path: Path
) -> None:
    """Measured: Spark's readers honour the Hadoop line limit given as a read
    option (the JSON reader's corrupt record, Spark's text lines)."""
    from pyspark.sql import functions as F

    from spark.dumps import parse_dump_args, read_entries
    from spark.lines import READ_OPTIONS

    bad = tmp_path / "b.jsonl"
    bad.write_bytes(with_line(dump, 2, huge_entry(dump, HUGE)))
    lengths = spark.read.options(**READ_OPTIONS).text(str(bad)).select(F.octet_length("value"))
    assert 0 < lengths.agg(F.max("octet_length(value)")).first()[0] <= LIMIT + 3
    entries = read_entries(spark, parse_dump_args([str(bad)]))
    longest = entries.agg(F.max(F.greatest(*(F.length(c) for c in ("cid", "jwsToken")))))
    assert longest.first()[0] <= LIMIT + 3


def test_a_file_of_one_overlong_line_is_named(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No line of it is read at all: the dump directory still names it."""
    directory = tmp_path / "b"
    directory.mkdir()
    (directory / "0.jsonl").write_bytes(dump.read_bytes())
    only = directory / "1.jsonl"
    only.write_text(huge_entry(dump, LIMIT) + "\n")
    args = ["--quiet", f"a={dump}", f"b={directory}"]
    assert run_convergence(args, spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"error: {only}:1: line longer than {LIMIT} bytes (relay b)"
