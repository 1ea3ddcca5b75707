"""``dfos-relay peers`` as a subprocess reads the replication ledger a real
relay wrote to its SQLite store: a table by default, one JSON object with
``--json``, in any flag order and with the store from the environment; a
missing store file, a bad store URL or an unknown flag is one line on
stderr and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from relay.testing.workload import mixed_workload
from tests.support.relay_api import PAST_MS

from .conftest import DFOS_RELAY, RelayProcess, clean_env
from .test_command_lines import assert_one_line_failure


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DFOS_RELAY, *args], env=clean_env(env), capture_output=True, text=True, timeout=60
    )


def wait_for(check: object, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(store URL, source URL): a follower's SQLite store after it caught up
    with a source relay by live following and gossiped to it, then stopped."""
    db = tmp_path_factory.mktemp("peers") / "follower.db"
    store = f"sqlite:///{db}"
    source = RelayProcess(["--store", "memory://"])
    try:
        tokens = mixed_workload(40, seed=61, now_ms=PAST_MS)
        for i in range(0, len(tokens), 100):
            posted = httpx.post(
                source.url + "/operations", json={"operations": tokens[i : i + 100]}
            )
            assert posted.status_code == 200, posted.text
        follower = RelayProcess(["--store", store, "--peer", f"{source.url}#live+gossip"])
        try:

            def caught_up() -> bool:
                peers = httpx.get(follower.url + "/peers").json()["peers"]
                links = {link["direction"]: link for link in peers[0]["links"]}
                inbound = links.get("in", {})
                return inbound.get("state") == "live" and inbound.get("lagOps") == 0

            wait_for(caught_up)
        finally:
            status, output = follower.stop()
            assert status == 0, output
    finally:
        source.stop()
    return store, source.url


def test_the_table_names_every_link(written: tuple[str, str]) -> None:
    store, source = written
    done = run("peers", "--store", store)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.strip().splitlines()
    assert header.split()[:4] == ["PEER", "SCOPE", "DIR", "STATE"]
    cells = sorted(row.split()[:4] for row in rows)
    assert cells == [[source, "*", "in", "live"], [source, "*", "out", "initial"]] or cells == [
        [source, "*", "in", "live"], [source, "*", "out", "live"]]  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [("peers", "--json", "--store"), ("peers", "--store", "{store}", "--json")],
    ids=["json-first", "store-first"],
)
def test_json_in_any_flag_order(written: tuple[str, str], args: tuple[str, ...]) -> None:
    store, source = written
    argv = [a.replace("{store}", store) for a in args]
    if argv[-1] == "--store":
        argv.append(store)
    done = run(*argv)
    assert done.returncode == 0, done.stderr
    links = {link["direction"]: link for link in json.loads(done.stdout)["links"]}
    inbound = links["in"]
    assert (inbound["peer"], inbound["scopeId"], inbound["state"]) == (source, "*", "live")
    assert inbound["lagOps"] == 0 and inbound["failures"] == 0
    assert inbound["appliedToken"] == inbound["receivedToken"]
    assert links["out"]["lagOps"] == 0


def test_the_store_comes_from_the_environment(written: tuple[str, str]) -> None:
    store, source = written
    done = run("peers", "--json", env={"DFOS_RELAY_STORE": store})
    assert done.returncode == 0, done.stderr
    assert {link["peer"] for link in json.loads(done.stdout)["links"]} == {source}


def test_an_empty_ledger(tmp_path: Path) -> None:
    done = run("peers", "--store", "memory://")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no replication links recorded")
    assert json.loads(run("peers", "--store", "memory://", "--json").stdout) == {"links": []}


def test_errors_are_one_line(tmp_path: Path) -> None:
    missing = assert_one_line_failure(run("peers", "--store", f"sqlite:///{tmp_path}/no.db"),
                                      "peers")  # fmt: skip
    assert "no SQLite file" in missing
    assert not (tmp_path / "no.db").exists()
    bad = run("peers", "--store", "ftp://nowhere")
    assert bad.returncode == 2
    assert_one_line_failure(bad, "peers")
    unknown = run("peers", "--verbose")
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1
    down = run("peers", "--store", "postgresql://postgres@127.0.0.1:1/test")
    assert down.returncode == 1
    assert_one_line_failure(down, "peers")
