"""spark.dumps: a dump line holding a JSON array is a malformed line (exit 2,
file and line named), never read as its entries.

Spark's JSON reader takes a top-level array for several records (and an
empty one for none), so without the line audit such a line became ops, or
vanished."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import EXIT_BAD_INPUT, run_convergence

from .relays import one_relay_dump

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("arrays"), seed=31)


def entries(dump: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in dump.read_text().splitlines()]


@pytest.mark.parametrize(
    ("array", "prefix"),
    [(slice(0, 2), ""), (slice(0, 1), ""), (slice(0, 0), ""), (slice(0, 2), " \t")],
    ids=["two-entries", "one-entry", "empty", "after-whitespace"],
)
def test_an_array_line_is_named_as_malformed(
    spark: Any,
    dump: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    array: slice,
    prefix: str,
) -> None:
    """The array's entries are b's own (each on its line too): read as entries
    they changed nothing, so the relays looked converged."""
    listed = entries(dump)
    lines = [json.dumps(e) for e in listed]
    lines.insert(3, prefix + json.dumps(listed[array]))
    bad = tmp_path / "b.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.strip() == f"error: {bad}:4: not a JSON object (relay b)"


def test_an_array_line_in_a_gzip_dump_directory_is_named(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = entries(dump)
    directory = tmp_path / "b"
    directory.mkdir()
    (directory / "0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in listed))
    lines = [json.dumps(listed[:2]), *(json.dumps(e) for e in listed)]
    bad = directory / "1.jsonl.gz"
    bad.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    args = ["--quiet", f"a={dump}", f"b={directory}"]
    assert run_convergence(args, spark=spark) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.strip() == f"error: {bad}:1: not a JSON object (relay b)"
