"""``dfos-relay dump-log`` (resumable JSON Lines) and ``dfos-relay import``
(through the verification pipeline) against a served relay."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relay.cli import main
from relay.testing.workload import mixed_workload

from .conftest import RelayProcess
from .test_serve_command import metric

N_OPS = 150


@pytest.fixture(scope="module")
def seeded() -> Iterator[RelayProcess]:
    relay = RelayProcess(["--store", "memory://"])
    tokens = mixed_workload(N_OPS, seed=9)
    with httpx.Client(base_url=relay.url, timeout=30) as client:
        for i in range(0, len(tokens), 100):
            client.post("/operations", json={"operations": tokens[i : i + 100]})
    yield relay
    relay.stop()


def test_dump_resumes_and_import_restores(
    seeded: RelayProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "log.jsonl"
    assert main(["dump-log", seeded.url, "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    total = len(lines)
    assert total >= N_OPS + 2
    assert set(json.loads(lines[0])) == {"cid", "jwsToken", "kind", "chainId"}

    # Interrupted dump: keep some lines plus half a line; resuming completes it.
    out.write_text("\n".join(lines[:40]) + "\n" + lines[40][:10])
    assert main(["dump-log", seeded.url, "-o", str(out)]) == 0
    resumed = out.read_text().splitlines()
    assert [json.loads(x)["cid"] for x in resumed] == [json.loads(x)["cid"] for x in lines]
    capsys.readouterr()

    store = f"sqlite:///{tmp_path}/restored.db"
    full = tmp_path / "full.jsonl"
    full.write_text("\n".join(lines) + "\n")
    assert main(["import", str(full), "--store", store]) == 0
    first = capsys.readouterr().out
    # The source relay's own identity ops are new here too; nothing rejected.
    assert f"imported {total} entries" in first and "rejected 0" in first
    assert main(["import", str(full), "--store", store]) == 0
    assert f"duplicate {total}" in capsys.readouterr().out


def test_transfer_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"cid": "x"}\n')
    assert main(["import", str(bad), "--store", "memory://"]) == 1
    assert (
        capsys.readouterr().err
        == f"dfos-relay import: error: {bad}:1: not a log entry with a jwsToken\n"
    )
    assert main(["dump-log", "http://127.0.0.1:9", "-o", str(tmp_path / "o.jsonl")]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["import", str(bad), "--store", "mysql://x"]) == 2


def test_peered_serve_syncs_and_reports_peer_metrics(seeded: RelayProcess) -> None:
    follower = RelayProcess(
        ["--store", "memory://", "--peer", f"{seeded.url}#sync", "--sync-interval", "0.2"]
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            text = httpx.get(follower.url + "/metrics").text
            if metric(text, "dfos_relay_peer_syncs_total", peer=seeded.url, result="ok") >= 1:
                break
            time.sleep(0.2)
        assert metric(text, "dfos_relay_peer_syncs_total", peer=seeded.url, result="ok") >= 1
        assert metric(text, "dfos_relay_log_length") >= N_OPS
    finally:
        code, _ = follower.stop()
    assert code == 0
