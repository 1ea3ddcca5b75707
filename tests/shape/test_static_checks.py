"""The code keeps its shape: layers point one way (import-linter contracts in
pyproject.toml), ``ruff`` finds nothing and ``mypy`` type-checks every
package. Each runs as the developer would run it, from the project root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run_tool(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("lint-imports", "--no-cache"), id="import-linter layer contracts"),
        pytest.param(("ruff", "check", "--no-cache", "."), id="ruff"),
        pytest.param(("mypy",), id="mypy"),
    ],
)
def test_tool_reports_nothing(argv: tuple[str, ...]) -> None:
    done = run_tool(*argv)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"


def test_layer_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The contract is live: an ingest module importing the HTTP layer breaks it."""
    probe = ROOT / "relay" / "ingest" / "_probe_upward_import.py"
    probe.write_text("import relay.http.app  # noqa: F401\n")
    try:
        done = run_tool("lint-imports", "--no-cache")
    finally:
        probe.unlink()
    assert done.returncode != 0
