"""A SQLite ``{IN}`` list is one JSON parameter that ``json_each`` reads back exactly."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from stores.sql.dialect import SQLITE


def _read_back(values: list[str]) -> list[str]:
    with sqlite3.connect(":memory:") as conn:
        sql = "SELECT value FROM json_each(?) ORDER BY key"
        return [row[0] for row in conn.execute(sql, (SQLITE.lst(values),))]


def test_a_list_of_cids_reads_back_in_order() -> None:
    cids = ["bafyreia", "bafyreib", "did:dfos:xyz"]
    assert _read_back(cids) == cids


def test_an_empty_list_matches_nothing() -> None:
    assert _read_back([]) == []


def test_a_lone_surrogate_still_makes_a_parameter() -> None:
    # orjson refuses lone surrogates; the json fallback escapes them as \\udxxx.
    assert SQLITE.lst(["a\ud800b"]) == '["a\\ud800b"]'


# No lone surrogates (not UTF-8) and no NUL, which SQLite's json_each cuts a
# text at whichever JSON writer escaped it; CIDs and DIDs hold neither.
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))))
def test_any_valid_text_reads_back_unchanged(values: list[str]) -> None:
    assert _read_back(values) == values
