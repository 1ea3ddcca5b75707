"""A small job (under ``SMALL_INPUT_BYTES`` of local dumps) does not pay for
what only a large one needs: one shuffle partition unless told otherwise and,
in a local session it starts, a JVM without C2 or G1 and no UI. A large,
remote or unsized input keeps the defaults; the caller's settings win."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import (
    DEFAULT_SHUFFLE_PARTITIONS,
    GZIP_RATIO,
    SMALL_INPUT_BYTES,
    SMALL_JOB_JAVA_OPTIONS,
    configure,
    is_small,
    run_convergence,
    session_settings,
)
from spark.dumpargs import DumpSpec

from .relays import one_relay_dump

pytestmark = pytest.mark.spark

JAVA = "spark.driver.extraJavaOptions"


def sized(path: Path, size: int) -> DumpSpec:
    path.write_bytes(b"\n" * size)
    return DumpSpec(path.stem, str(path))


def test_small_is_the_local_bytes_of_all_dumps(tmp_path: Path) -> None:
    half = SMALL_INPUT_BYTES // 2
    assert is_small([sized(tmp_path / "a.jsonl", half - 1)])
    assert is_small([sized(tmp_path / "a.jsonl", half), sized(tmp_path / "b.jsonl", half - 1)])
    assert not is_small([sized(tmp_path / "a.jsonl", half), sized(tmp_path / "b.jsonl", half)])
    folder = tmp_path / "dir"
    folder.mkdir()
    sized(folder / "1.jsonl", half)
    sized(folder / "2.jsonl", half)
    assert not is_small([DumpSpec("d", f"file://{folder}")])


def test_a_gzip_dump_counts_as_its_likely_content(tmp_path: Path) -> None:
    packed = tmp_path / "a.jsonl.gz"
    packed.write_bytes(gzip.compress(b"x") + b"\0" * (SMALL_INPUT_BYTES // GZIP_RATIO))
    assert not is_small([DumpSpec("a", str(packed))])


def test_a_remote_or_missing_dump_is_not_small(tmp_path: Path) -> None:
    assert not is_small([DumpSpec("a", "hdfs://nn/dumps/a.jsonl")])
    assert not is_small([DumpSpec("a", str(tmp_path / "gone.jsonl"))])


def test_a_small_local_session_starts_lean() -> None:
    lean = session_settings("local[2]", None, small=True)
    assert lean[JAVA] == SMALL_JOB_JAVA_OPTIONS
    assert lean["spark.ui.enabled"] == "false"
    asked = {JAVA: "-Xss4m", "spark.ui.enabled": "true"}
    assert session_settings("local[2]", asked, small=True).items() >= asked.items()


@pytest.mark.parametrize(
    ("master", "small"), [("local[2]", False), ("yarn", True), (None, True)], ids=str
)
def test_a_large_or_cluster_session_keeps_the_defaults(master: str | None, small: bool) -> None:
    settings = session_settings(master, None, small=small)
    assert JAVA not in settings
    assert "spark.ui.enabled" not in settings


def test_a_small_job_shuffles_into_one_partition_unless_told(spark: Any, tmp_path: Path) -> None:
    dump = one_relay_dump(tmp_path, seed=5)
    try:
        assert run_convergence(["--quiet", str(dump)], spark=spark) == 0
        assert spark.conf.get("spark.sql.shuffle.partitions") == "1"
        given = ["--quiet", "--shuffle-partitions", "3", str(dump)]
        assert run_convergence(given, spark=spark) == 0
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        configure(spark, DEFAULT_SHUFFLE_PARTITIONS)


def test_the_report_is_the_same_in_one_partition_or_several(spark: Any, tmp_path: Path) -> None:
    """Small inputs now run in one partition by default; the multi-partition
    paths must still give the very same report (divergent, with --verify)."""
    dump = one_relay_dump(tmp_path, seed=7)
    lines = dump.read_text().splitlines(keepends=True)
    (tmp_path / "b.jsonl").write_text("".join(lines[: len(lines) * 2 // 3]))
    reports = []
    try:
        for partitions in ("1", "4"):
            out = tmp_path / f"report-{partitions}.json"
            args = ["--quiet", "--verify", "--shuffle-partitions", partitions, "--out", str(out)]
            run_convergence([*args, f"a={dump}", f"b={tmp_path / 'b.jsonl'}"], spark=spark)
            reports.append(out.read_bytes())
    finally:
        configure(spark, DEFAULT_SHUFFLE_PARTITIONS)
    assert reports[0] == reports[1]
    assert json.loads(reports[0])["partialOps"]["total"] > 0
