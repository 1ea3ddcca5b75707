"""spark.dumps: a field of the wrong JSON type is bad input (exit 2, one line).

Spark's JSON reader hands a string field the JSON text of a number, object
or boolean; such lines must still be named with file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import EXIT_BAD_INPUT, EXIT_DIVERGED, run_convergence
from spark.dumps import parse_dump_args, read_entries

from .relays import one_relay_dump

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_relay_dump(tmp_path_factory.mktemp("types"), seed=24)


def with_last_line(dump: Path, out: Path, line: str) -> tuple[Path, int]:
    lines = dump.read_text().splitlines()
    bad = out / "b.jsonl"
    bad.write_text("\n".join([*lines[1:], line]) + "\n")
    return bad, len(lines)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("cid", 12, "field cid missing or not a string"),
        ("jwsToken", 7, "field jwsToken missing or not a string"),
        ("chainId", {"seq": 1}, "field chainId missing or not a string"),
        ("cid", True, "field cid missing or not a string"),
        ("cid", float("nan"), "not valid JSON"),
    ],
    ids=["number-cid", "number-token", "object-chain", "boolean-cid", "nan-cid"],
)
def test_a_field_of_another_type_exits_2_naming_file_and_line(
    spark: Any,
    dump: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: object,
    reason: str,
) -> None:
    entry = json.loads(dump.read_text().splitlines()[0])
    bad, line = with_last_line(dump, tmp_path, json.dumps({**entry, field: value}))
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}:{line}: {reason} (relay b)"


def test_single_quotes_are_not_json(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = json.loads(dump.read_text().splitlines()[0])
    quoted = "{" + ", ".join(f"'{k}': '{v}'" for k, v in entry.items()) + "}"
    bad, line = with_last_line(dump, tmp_path, quoted)
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.strip() == f"error: {bad}:{line}: not valid JSON (relay b)"


def test_a_string_that_reads_like_a_number_is_a_string(
    spark: Any, dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "12" is a well-formed (if bogus) CID: the relays differ, the input is fine."""
    entry = json.loads(dump.read_text().splitlines()[0])
    bad, _ = with_last_line(dump, tmp_path, json.dumps({**entry, "cid": "12"}))
    assert run_convergence(["--quiet", f"a={dump}", f"b={bad}"], spark=spark) == EXIT_DIVERGED
    assert capsys.readouterr().err == ""


def test_chain_ids_starting_with_a_digit_are_read_in_one_pass(
    spark: Any, dump: Path, tmp_path: Path
) -> None:
    """Content chain ids are drawn from an alphabet with digits: their lines
    are well formed, not sent to be checked line by line (a second, Python
    pass over the whole file on every run)."""
    entries = [json.loads(line) for line in dump.read_text().splitlines()]
    digits = [
        {**e, "chainId": "2" + e["chainId"][1:]} if e["kind"] == "content-op" else e
        for e in entries
    ]
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(e) + "\n" for e in digits))
    flagged = read_entries(spark, parse_dump_args([str(b)])).where("NOT ok").count()
    assert flagged == 0
