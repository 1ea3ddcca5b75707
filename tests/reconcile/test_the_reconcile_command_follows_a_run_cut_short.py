"""`dfos-relay reconcile` follows a run cut short by a bound that moved ops
with another at once, up to `--runs` (as the relay's own scheduler does),
printing one line (or JSON object) per run. A last run still cut short
fails the command in one line saying to run again, as one cut-short run
failed it before (when a bound stopped every run, the command did not go
on at all). `--max-ops` bounds the ops one run fetches and pushes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relay.reconcile.answers import TAKEN_PER_PEER
from relay.testing.workload import mixed_workload
from tests.cli.conftest import RelayProcess
from tests.support.relay_api import PAST_MS

from .test_reconcile_between_relay_processes import run

OPS = 120
MAX_OPS = 50  # three runs: 50, 50, 20


@pytest.fixture(scope="module")
def remote() -> Iterator[RelayProcess]:
    proc = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    try:
        tokens = mixed_workload(OPS, seed=83, now_ms=PAST_MS)
        with httpx.Client(timeout=10) as http:
            for start in range(0, len(tokens), 100):
                batch = tokens[start : start + 100]
                http.post(proc.url + "/operations", json={"operations": batch}).raise_for_status()
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def holding(remote: RelayProcess) -> int:
    entries = httpx.get(remote.url + "/log", params={"limit": 1000}).json()["entries"]
    assert len(entries) % MAX_OPS, "the last run must hold fewer than --max-ops"
    return len(entries)


@pytest.mark.parametrize(
    "order",
    [["reconcile", "{peer}", "--pull", "--max-ops", "50", "--store", "{store}"],
     ["reconcile", "--max-ops", "50", "--store", "{store}", "--runs", "5", "--pull", "{peer}"]],
)  # fmt: skip
async def test_runs_cut_short_are_followed_until_done(
    tmp_path: Path, remote: RelayProcess, holding: int, order: list[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'a.db'}"
    done = run(*(a.format(peer=remote.url, store=store) for a in order))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == -(-holding // MAX_OPS), done.stdout
    follows = "cut short at a bound of one run, another follows"
    assert all(line.endswith(follows) for line in lines[:-1])
    assert "cut short" not in lines[-1]
    again = json.loads(run("reconcile", remote.url, "--pull", "--json", "--store", store).stdout)
    assert (again["need"], again["cutShort"]) == (0, False)  # (it lacks our relay's own ops)


async def test_a_last_run_still_cut_short_fails_saying_to_run_again(
    tmp_path: Path, remote: RelayProcess, holding: int
) -> None:
    store = f"sqlite:///{tmp_path / 'a.db'}"
    args = ["--pull", "--max-ops", str(MAX_OPS), "--store", store]
    done = run("reconcile", remote.url, "--runs", "1", *args)
    assert done.returncode == 1 and done.stdout.strip().endswith("cut short at a bound of one run")
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.strip().endswith(" 0 sent); 1 run(s): run again to go on"), done.stderr
    done = run("reconcile", remote.url, "--runs", "1", "--json", *args)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and (report["cutShort"], report["fetched"]) == (True, MAX_OPS)
    done = run("reconcile", remote.url, *args)  # the rest
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == -(-holding // MAX_OPS) - 2, done.stdout


@pytest.mark.parametrize("flag", ["--runs", "--max-ops"])
@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_bad_count_is_a_one_line_usage_error(tmp_path: Path, flag: str, value: str) -> None:
    store = f"sqlite:///{tmp_path / 'x.db'}"
    done = run("reconcile", "http://127.0.0.1:9", flag, value, "--store", store)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and flag in done.stderr, done.stderr
    assert not (tmp_path / "x.db").exists()


def test_more_ops_than_a_run_can_remember_are_a_one_line_usage_error(tmp_path: Path) -> None:
    """A run pushing more than ``TAKEN_PER_PEER`` ops would forget which the
    peer took before the next run checks them: refused, naming the maximum
    (before: taken, and the memory silently went short)."""
    store = f"sqlite:///{tmp_path / 'x.db'}"
    most = str(TAKEN_PER_PEER)
    done = run(
        "reconcile", "http://127.0.0.1:9", "--max-ops", str(TAKEN_PER_PEER + 1), "--store", store
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"--max-ops: at most {most} " in done.stderr, done.stderr
    assert not (tmp_path / "x.db").exists()
    at_most = run("reconcile", "http://127.0.0.1:9", "--max-ops", most, "--store", store)
    assert at_most.returncode == 1 and "--max-ops" not in at_most.stderr  # the peer is down
