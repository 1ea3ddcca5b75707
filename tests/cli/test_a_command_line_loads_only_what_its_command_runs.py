"""Every ``dfos-relay`` call pays, before it does anything, for what its
command line imports. The parser (and so ``--help``, ``--version`` and
every usage error) loads no HTTP client or server, no metrics, database
driver, Spark or relay engine; a command that only opens a store (``feed
reset-epoch``, ``verify-store`` and ``peers`` on SQLite) loads no HTTP
stack, engine or Postgres driver.

Each command line runs as the console script does, in a fresh interpreter,
which then writes the names of the modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import clean_env

# the console script, plus the modules it loaded written at exit (also
# after argparse's SystemExit for --help and usage errors)
CONSOLE_SCRIPT = """
import atexit, json, sys

loaded_to = sys.argv.pop(1)


def write_loaded() -> None:
    with open(loaded_to, "w") as fh:
        json.dump(sorted(sys.modules), fh)


atexit.register(write_loaded)
from relay.cli import main

sys.exit(main())
"""

SERVER_AND_CLIENTS = ("httpx", "starlette", "hypercorn", "prometheus_client", "relay.http.app",
                      "relay.engine", "relay.compose")  # fmt: skip
DRIVERS_AND_JOBS = ("asyncpg", "pyspark")
STORE_COMMANDS = [["verify-store"], ["peers"], ["peers", "--json"]]
PARSER_ONLY = (*SERVER_AND_CLIENTS, *DRIVERS_AND_JOBS, "aiosqlite", "relay.reconcile.initiator")


def loaded_by(tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "loaded.json"
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, str(out), *args],
        env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return set(json.loads(out.read_text()))


def heavy(loaded: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules of ``loaded`` that are, or are inside, one of ``packages``."""
    inside = tuple(p + "." for p in packages)
    return sorted(m for m in loaded if m in packages or m.startswith(inside))


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["serve", "--help"],
        ["serve", "--port", "-1"],
        ["serve", "--no-such-flag"],
        ["serve", "--store", "mysql://x"],
        ["reconcile", "--help"],
        ["converge", "--help"],
        ["follow"],
    ],
    ids=" ".join,
)
def test_parsing_a_command_line_loads_no_server_client_driver_or_engine(
    tmp_path: Path, args: list[str]
) -> None:
    assert heavy(loaded_by(tmp_path, *args), PARSER_ONLY) == []


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An SQLite store made by ``feed reset-epoch``, itself a store-only command."""
    where = tmp_path_factory.mktemp("store")
    store = f"sqlite:///{where / 'relay.db'}"
    created = loaded_by(where, "feed", "reset-epoch", "--store", store)
    assert "aiosqlite" in created  # it did open it
    assert heavy(created, (*SERVER_AND_CLIENTS, *DRIVERS_AND_JOBS)) == []
    return store


@pytest.mark.parametrize("command", STORE_COMMANDS, ids=" ".join)
def test_a_command_that_only_opens_a_store_loads_no_http_stack_or_engine(
    tmp_path: Path, sqlite_store: str, command: list[str]
) -> None:
    used = loaded_by(tmp_path, *command, "--store", sqlite_store)
    assert "aiosqlite" in used  # it did open it
    assert heavy(used, (*SERVER_AND_CLIENTS, *DRIVERS_AND_JOBS)) == []
