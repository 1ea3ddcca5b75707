"""``hypercorn relay.asgi:app`` with a bad ``DFOS_RELAY_*`` value, or a store
that cannot open, fails its start-up with one line naming the cause; it
never goes on serving without a relay (hypercorn takes an app that raises
in its lifespan for one without lifespan support, and would answer every
request 500)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from relay.testing.server import free_port

from .conftest import clean_env

HYPERCORN = str(Path(sys.executable).parent / "hypercorn")


def _hypercorn(env: dict[str, str], cwd: Path) -> tuple[str, bool]:
    """(everything it printed, whether /healthz ever answered 200)."""
    port = free_port()
    proc = subprocess.Popen(
        [HYPERCORN, "relay.asgi:app", "--bind", f"127.0.0.1:{port}"],
        env=clean_env(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    served = False
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # still running: did it serve?
        with contextlib.suppress(httpx.HTTPError):
            served = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    return out, served or ("Running on" in out and "Lifespan failure" not in out)


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("DFOS_RELAY_PORT", "abc", "DFOS_RELAY_PORT: expected an integer 1..65535, got 'abc'"),
        ("DFOS_RELAY_STORE", "ftp://x", "DFOS_RELAY_STORE: expected memory://"),
        ("DFOS_RELAY_STORE", "sqlite:///{tmp}", "is not a regular file"),
    ],
)
def test_a_bad_environment_stops_start_up_in_one_line(
    variable: str, value: str, expected: str, tmp_path: Path
) -> None:
    out, served = _hypercorn({variable: value.format(tmp=tmp_path)}, tmp_path)
    assert not served, out
    assert "continuing without Lifespan support" not in out, out
    lines = [line for line in out.splitlines() if expected in line]
    assert lines, out
    # the cause once in the relay's own line, and hypercorn's failure names
    # it in one line, not with a second traceback inside its message
    assert out.count("Traceback") <= 1, out
