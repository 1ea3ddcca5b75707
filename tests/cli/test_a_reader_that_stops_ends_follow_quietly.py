"""``dfos-relay follow URL | head -1``: when the reader stops reading, the
command ends quietly (no traceback, no "Exception ignored" note)."""

from __future__ import annotations

import subprocess

import httpx

from relay.testing.workload import mixed_workload

from .conftest import DFOS_RELAY, RelayProcess, clean_env


def test_follow_into_a_closed_pipe_ends_without_a_traceback() -> None:
    relay = RelayProcess(["--store", "memory://"])
    try:
        tokens = mixed_workload(150, seed=3)  # more than a pipe buffer of events
        with httpx.Client(base_url=relay.url, timeout=30) as client:
            for i in range(0, len(tokens), 100):
                client.post("/operations", json={"operations": tokens[i : i + 100]})
        proc = subprocess.Popen(
            [DFOS_RELAY, "follow", relay.url, "--since", "0", "--no-live"],
            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().startswith("{")
        proc.stdout.close()  # what `head -1` does after its line
        _, err = proc.communicate(timeout=60)
    finally:
        relay.stop()
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert proc.returncode != 0
