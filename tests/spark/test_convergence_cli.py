"""The convergence job's command line: bad input is one line and exit 2."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import EXIT_AGREE, EXIT_BAD_INPUT, run_convergence

from .relays import one_relay_dump

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("cli"), seed=23)


def test_truncated_gzip_dump_exits_2_naming_the_file(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dump cut short while being copied (or written) is bad input."""
    packed = gzip.compress(dump.read_bytes())
    torn = tmp_path / "torn.jsonl.gz"
    torn.write_bytes(packed[: len(packed) // 2])
    assert run_convergence(["--quiet", f"a={dump}", str(torn)], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "torn.jsonl.gz" in err


@pytest.mark.parametrize(
    "option",
    [["--max-listed", "-1"], ["--shuffle-partitions", "0"], ["--out", "/nonexistent/r.json"]],
    ids=["negative-max-listed", "zero-partitions", "out-in-missing-directory"],
)
def test_bad_options_exit_2_in_one_line(
    spark: Any, dump: Path, option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_convergence(["--quiet", *option, str(dump)], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err and "Traceback" not in err


def test_malformed_line_in_a_file_named_with_spaces_and_commas_is_named(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error path finds the file again: Spark names it by an escaped URI."""
    bad = tmp_path / "my dump, 100%.jsonl"
    bad.write_text(dump.read_text() + '{"cid": 1}\n')
    line = len(dump.read_text().splitlines()) + 1
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}:{line}: field cid missing or not a string (relay b)"


def test_a_local_dump_path_is_not_a_glob(spark: Any, dump: Path, tmp_path: Path) -> None:
    """``b[1].jsonl`` is that file (Spark would read it as a pattern matching
    ``b1.jsonl``), and ``c*.jsonl`` only that file, not its neighbours."""
    (tmp_path / "b[1].jsonl").write_bytes(dump.read_bytes())
    (tmp_path / "c*.jsonl").write_bytes(dump.read_bytes())
    (tmp_path / "c-other.jsonl").write_text(dump.read_text().splitlines()[0] + "\n")
    args = [f"a={dump}", f"b={tmp_path / 'b[1].jsonl'}", f"c={tmp_path / 'c*.jsonl'}"]
    assert run_convergence(["--quiet", *args], spark=spark) == EXIT_AGREE


@pytest.mark.parametrize(
    "option",
    [["--out", "."], ["--parquet", "file"], ["--parquet", "file/tables"]],
    ids=["out-is-a-directory", "parquet-is-a-file", "parquet-under-a-file"],
)
def test_unwritable_outputs_exit_2_in_one_line(
    spark: Any,
    dump: Path,
    tmp_path: Path,
    option: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "file").write_text("not a directory\n")
    flag, path = option
    args = ["--quiet", flag, str(tmp_path / path), str(dump)]
    assert run_convergence(args, spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {flag} {tmp_path / path}")


def test_deeply_nested_line_exits_2_naming_it(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's JSON decoder recurses per level: the line checker must not."""
    bad = tmp_path / "deep.jsonl"
    bad.write_text(dump.read_text() + "[" * 5000 + "]" * 5000 + "\n")
    line = len(dump.read_text().splitlines()) + 1
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}:{line}: JSON nested too deeply (relay b)"


@pytest.mark.parametrize("subdir", ["2026-11", "kind=beacon"], ids=["plain", "partition-style"])
def test_a_dump_directory_holding_directories_exits_2(
    spark: Any, dump: Path, tmp_path: Path, subdir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark reads no plain subdirectory (both relays would read as empty
    logs, "converged") and takes ``kind=beacon`` for a partition whose value
    replaces every entry's kind."""
    dirs = []
    for name in ("a", "b"):
        nested = tmp_path / name / subdir
        nested.mkdir(parents=True)
        (nested / "part.jsonl").write_bytes(dump.read_bytes())
        dirs.append(f"{name}={tmp_path / name}")
    assert run_convergence(["--quiet", *dirs], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"holds directories ({subdir})" in err


def test_an_empty_dump_directory_exits_2(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "b").mkdir()
    args = ["--quiet", f"a={dump}", f"b={tmp_path / 'b'}"]
    assert run_convergence(args, spark=spark) == EXIT_BAD_INPUT
    assert "holds no dump files" in capsys.readouterr().err
