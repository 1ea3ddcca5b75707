"""spark.dumps: an unknown kind is named in one short line: its first 64
characters and, when longer, its length (a dump line may be megabytes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import EXIT_BAD_INPUT, run_convergence
from spark.dumps import malformed_reason

from .relays import one_relay_dump

pytestmark = pytest.mark.spark

ENTRY = {"cid": "bafy", "jwsToken": "e30.e30.sig", "chainId": "c"}


@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        ("bogus", "'bogus'"),
        ("k" * 64, repr("k" * 64)),
        ("k" * 65, f"{'k' * 64!r}... (65 characters)"),
        ("é" * 100_000, f"{'é' * 64!r}... (100000 characters)"),
    ],
    ids=["short", "64-characters", "65-characters", "100k-characters"],
)
def test_the_reason_shows_64_characters_and_the_length(kind: str, shown: str) -> None:
    reason = malformed_reason(json.dumps({**ENTRY, "kind": kind}))
    assert reason == f"unknown kind {shown}"


def test_an_unknown_kind_of_a_million_characters_is_one_short_error_line(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = one_relay_dump(tmp_path, seed=24)
    lines = dump.read_text().splitlines()
    entry = json.loads(lines[0])
    bad = tmp_path / "b.jsonl"
    bad.write_text("\n".join([*lines, json.dumps({**entry, "kind": "k" * 1_000_000})]) + "\n")
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    shown = f"{'k' * 64!r}... (1000000 characters)"
    assert err == f"error: {bad}:{len(lines) + 1}: unknown kind {shown} (relay b)"
    assert len(err) < 200 + len(str(bad))
