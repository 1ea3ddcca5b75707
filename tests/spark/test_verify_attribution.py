"""--verify blames the relays serving the very log entry (token, CID, claim).

A token filed under another chain, or under a CID it does not have, is
judged on its own: the relays holding the honest entry are not blamed, and
the lying entry is not hidden behind the honest one's verdict."""

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
    return one_relay_dump(tmp_path_factory.mktemp("attribution"), seed=25)


def entries_of(dump: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in dump.read_text().splitlines()]


def write(path: Path, entries: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def verify(spark: Any, out: Path, *dumps: str) -> tuple[int, dict[str, Any]]:
    report = out / "report.json"
    code = run_convergence(["--quiet", "--verify", "--out", str(report), *dumps], spark=spark)
    return code, json.loads(report.read_text())


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_a_token_filed_under_another_chain_blames_only_that_relay(
    spark: Any, dump: Path, tmp_path: Path
) -> None:
    entries = entries_of(dump)
    beacon = next(e for e in entries if e["kind"] == "beacon")
    other = next(e["chainId"] for e in entries if e["chainId"] != beacon["chainId"])
    b = write(
        tmp_path / "b.jsonl", [{**e, "chainId": other} if e is beacon else e for e in entries]
    )
    code, report = verify(spark, tmp_path, f"a={dump}", f"b={b}")
    assert code == EXIT_DIVERGED
    [op] = report["invalidOps"]["ops"]
    assert (op["cid"], op["kind"], op["chainId"]) == (beacon["cid"], "beacon", other)
    assert (op["tokenHash"], op["servedBy"]) == (token_hash(beacon["jwsToken"]), ["b"])


def test_a_token_filed_under_a_second_cid_is_invalid_there(
    spark: Any, dump: Path, tmp_path: Path
) -> None:
    """One relay serves a content op under its CID and again under a made-up
    one: all relays agree, but that second entry does not verify."""
    entries = entries_of(dump)
    op = next(e for e in entries if e["kind"] == "content-op")
    fake = {**op, "cid": op["cid"][:-4] + "aaaa"}
    a = write(tmp_path / "a.jsonl", [*entries, fake])
    code, report = verify(spark, tmp_path, f"a={a}")
    assert report["converged"] and report["verified"] is False
    assert code == EXIT_DIVERGED
    [invalid] = report["invalidOps"]["ops"]
    assert (invalid["cid"], invalid["servedBy"]) == (fake["cid"], ["a"])
    assert invalid["reason"].startswith(f"log entry cid {fake['cid']} differs from header cid")
