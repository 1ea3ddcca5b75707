"""A bad value taken from the environment is blamed on the variable that
holds it, never on a flag the operator did not give: ``DFOS_RELAY_STORE``
for every command that takes a store, ``DFOS_RELAY_PORT`` for the port a
metrics port collides with."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import DFOS_RELAY, clean_env
from .test_command_lines import assert_one_line_failure

STORE_COMMANDS = [
    ["import", "{dump}"],
    ["reconcile", "http://127.0.0.1:9"],
    ["verify-store"],
    ["peers"],
    ["feed", "reset-epoch"],
    ["serve", "--port", "9"],
]


def run_with(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DFOS_RELAY, *args], env=clean_env(env), capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("bad", ["bogus://", "sqlite://"])
@pytest.mark.parametrize("argv", STORE_COMMANDS, ids=lambda argv: argv[0])
def test_a_bad_store_from_the_environment_names_the_variable(
    argv: list[str], bad: str, tmp_path: Path
) -> None:
    dump = tmp_path / "d.jsonl"
    dump.write_text("")
    args = [a.format(dump=dump) for a in argv]
    done = run_with({"DFOS_RELAY_STORE": bad}, *args)
    line = assert_one_line_failure(done, argv[0])
    assert done.returncode == 2
    assert line.split("error: ", 1)[1].startswith("DFOS_RELAY_STORE: "), line
    assert "--store" not in line and repr(bad) in line
    # the flag, when given, is still the one blamed (and wins over the variable)
    flagged = run_with({"DFOS_RELAY_STORE": "memory://"}, *args, "--store", bad)
    line = assert_one_line_failure(flagged, argv[0])
    assert line.split("error: ", 1)[1].startswith("--store: "), line


def test_a_metrics_port_colliding_with_the_port_names_where_the_port_came_from() -> None:
    env = {"DFOS_RELAY_PORT": "5000", "DFOS_RELAY_METRICS_PORT": "5000"}
    done = run_with(env, "serve", "--store", "memory://")
    line = assert_one_line_failure(done, "serve")
    assert done.returncode == 2 and "--port" not in line and "DFOS_RELAY_PORT" in line
    flagged = run_with({}, "serve", "--store", "memory://", "--port", "5000",
                       "--metrics-port", "5000")  # fmt: skip
    line = assert_one_line_failure(flagged, "serve")
    assert line.endswith("the metrics port must differ from --port (5000)"), line
