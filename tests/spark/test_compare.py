"""spark.compare over dumps whose log entries disagree on a chain's kind."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import run_convergence

from .relays import one_relay_dump

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("compare"), seed=21)


def test_a_chain_claimed_under_two_kinds_is_divergent_not_a_crash(
    spark: Any, dump: Path, tmp_path: Path
) -> None:
    """One relay files the last op of an identity chain as a content op: the
    chain id then has heads of two kinds on that relay."""
    entries = [json.loads(line) for line in dump.read_text().splitlines()]
    ops = Counter(e["chainId"] for e in entries if e["kind"] == "identity-op")
    did = next(d for d, n in ops.items() if n > 1)
    last = max(
        i for i, e in enumerate(entries) if (e["chainId"], e["kind"]) == (did, "identity-op")
    )
    entries[last]["kind"] = "content-op"
    relabelled = tmp_path / "b.jsonl"
    relabelled.write_text("".join(json.dumps(e) + "\n" for e in entries))
    out = tmp_path / "report.json"
    code = run_convergence(
        ["--quiet", "--out", str(out), f"a={dump}", str(relabelled)], spark=spark
    )
    report = json.loads(out.read_text())
    assert code == 1 and not report["converged"]
    divergent = {(c["chainId"], c["kind"]): c for c in report["divergentChains"]}
    assert divergent[(did, "content-op")]["reasons"] == ["chain-missing"]
    assert "heads-differ" in divergent[(did, "identity-op")]["reasons"]
