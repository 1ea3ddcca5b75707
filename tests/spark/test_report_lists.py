"""The JSON report's lists: capped by --max-listed, exact totals, and the
same rows in the same order whatever the partitioning."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import EXIT_DIVERGED, run_convergence

from .relays import one_relay_dump

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("lists"), seed=26)


def entries_of(dump: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in dump.read_text().splitlines()]


def write(path: Path, entries: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def report_of(spark: Any, out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    report = out / "report.json"
    code = run_convergence(["--quiet", "--out", str(report), *args], spark=spark)
    return code, json.loads(report.read_text())


def broken_signatures(entry: dict[str, str]) -> list[dict[str, str]]:
    """Two copies of ``entry``, each with another character of its signature."""
    head, payload, sig = entry["jwsToken"].split(".")
    chars = [c for c in "ABC" if c != sig[10]][:2]
    return [{**entry, "jwsToken": f"{head}.{payload}.{sig[:10]}{c}{sig[11:]}"} for c in chars]


def test_lacking_ops_are_capped_with_their_count(spark: Any, dump: Path, tmp_path: Path) -> None:
    entries = entries_of(dump)
    chain = next(e["chainId"] for e in entries if e["kind"] == "content-op")
    dropped = sorted(e["cid"] for e in entries if e["chainId"] == chain)[:3]
    b = write(tmp_path / "b.jsonl", [e for e in entries if e["cid"] not in dropped])
    code, report = report_of(spark, tmp_path, "--max-listed", "1", f"a={dump}", f"b={b}")
    assert code == EXIT_DIVERGED
    [divergent] = [c for c in report["divergentChains"] if c["chainId"] == chain]
    assert divergent["lacking"] == {"b": dropped[:1]}
    assert divergent["lackingTotal"] == {"b": 3}


def test_invalid_ops_are_ordered_by_cid_claim_and_token(
    spark: Any, dump: Path, tmp_path: Path
) -> None:
    """Two relays serve one CID under two differently broken tokens, for the
    same reason: each row names its token and relay, in token order, and the
    cap keeps the first."""
    entries = entries_of(dump)
    op = [e for e in entries if e["kind"] == "content-op"][-1]  # no child to orphan
    broken = dict(zip("ab", broken_signatures(op), strict=True))
    dumps = [
        f"{name}={write(tmp_path / f'{name}.jsonl', [bad if e is op else e for e in entries])}"
        for name, bad in broken.items()
    ]
    held = sorted(
        (hashlib.sha256(bad["jwsToken"].encode()).hexdigest(), [name])
        for name, bad in broken.items()
    )
    _, report = report_of(spark, tmp_path, "--verify", *dumps)
    rows = [(r["tokenHash"], r["servedBy"]) for r in report["invalidOps"]["ops"]]
    assert rows == held
    _, capped = report_of(spark, tmp_path, "--verify", "--max-listed", "1", *dumps)
    assert capped["invalidOps"]["total"] == 2
    assert [(r["tokenHash"], r["servedBy"]) for r in capped["invalidOps"]["ops"]] == held[:1]
