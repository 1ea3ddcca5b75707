"""A token that does not decode is a divergence (and an invalid op), never a
failed job: Spark's ``unbase64`` throws on some malformed segments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import EXIT_DIVERGED, run_convergence

from .relays import one_relay_dump

pytestmark = pytest.mark.spark

SEGMENTS = ["abcde", "a===", "a=b", "é"]  # 1 mod 4, misplaced padding, not ASCII


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("undecodable"), seed=27)


@pytest.mark.parametrize("verify", [[], ["--verify"]], ids=["compare", "verify"])
def test_tokens_with_undecodable_payloads_are_reported(
    spark: Any, dump: Path, tmp_path: Path, verify: list[str]
) -> None:
    entry = json.loads(dump.read_text().splitlines()[-1])
    lines = [
        json.dumps({**entry, "cid": f"bafy{i}", "jwsToken": f"e30.{segment}.sig"})
        for i, segment in enumerate(SEGMENTS)
    ]
    b = tmp_path / "b.jsonl"
    b.write_text(dump.read_text() + "\n".join(lines) + "\n")
    out = tmp_path / "report.json"
    args = ["--quiet", *verify, "--out", str(out), f"a={dump}", f"b={b}"]
    assert run_convergence(args, spark=spark) == EXIT_DIVERGED
    report = json.loads(out.read_text())
    cids = [f"bafy{i}" for i in range(len(SEGMENTS))]
    assert sorted(op["cid"] for op in report["partialOps"]["ops"]) == cids
    if verify:
        assert {op["cid"] for op in report["invalidOps"]["ops"]} == set(cids)
