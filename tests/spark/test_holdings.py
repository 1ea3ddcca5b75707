"""spark.compare.holdings: one token filed under different claims by relays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import run_convergence

from .relays import one_relay_dump

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("holdings"), seed=22)


def test_a_token_filed_under_another_chain_is_not_converged(
    spark: Any, dump: Path, tmp_path: Path
) -> None:
    """Relay b serves the same beacon token as relay a, filed under another
    DID: the relays' logs differ, so they have not converged."""
    entries = [json.loads(line) for line in dump.read_text().splitlines()]
    beacon = next(e for e in entries if e["kind"] == "beacon")
    other = next(e["chainId"] for e in entries if e["chainId"] != beacon["chainId"])
    refiled = [{**e, "chainId": other} if e is beacon else e for e in entries]
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(e) + "\n" for e in refiled))
    out = tmp_path / "report.json"
    code = run_convergence(["--quiet", "--out", str(out), f"a={dump}", str(b)], spark=spark)
    report = json.loads(out.read_text())
    assert code == 1 and not report["converged"]
    [conflict] = report["tokenConflicts"]["cids"]
    assert conflict["cid"] == beacon["cid"]
    assert sorted((c["chainId"], c["servedBy"]) for c in conflict["claims"]) == sorted(
        [(beacon["chainId"], ["a"]), (other, ["b"])]
    )
