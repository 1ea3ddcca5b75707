"""A Postgres store URL with a bad port or a broken host is a one-line
usage error naming the URL, for every command that takes a store, instead
of a traceback from the driver when the store is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_command_lines import assert_one_line_failure, run

BAD = [
    "postgresql://u@127.0.0.1:abc/db",
    "postgresql://u@127.0.0.1:99999/db",
    "postgres://u@127.0.0.1:0/db",
    "postgresql://u@h1:5432,h2:x/db",
    "postgresql://u@[::1/db",
]


@pytest.mark.parametrize("url", BAD)
@pytest.mark.parametrize(
    "argv",
    [["import", "{dump}"], ["verify-store"], ["peers"], ["feed", "reset-epoch"],
     ["reconcile", "http://127.0.0.1:9"], ["serve", "--port", "9"]],
    ids=lambda argv: argv[0],
)  # fmt: skip
def test_a_malformed_postgres_url_is_one_line(argv: list[str], url: str, tmp_path: Path) -> None:
    dump = tmp_path / "d.jsonl"
    dump.write_text("")
    done = run(*[a.format(dump=dump) for a in argv], "--store", url, timeout=60)
    line = assert_one_line_failure(done, argv[0])
    assert done.returncode == 2 and line.split("error: ", 1)[1].startswith("--store: "), line
    assert repr(url) in line
