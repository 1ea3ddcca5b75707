"""Real `dfos-relay serve` processes (memory, SQLite and Postgres stores)
converge by reconciliation alone: peered `#reconcile` only, no gossip, no
log sync, after each took different forks of the same chains. And the
`dfos-relay reconcile` command, run beside a serving relay on the same
store, in every documented flag order, with one-line errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from relay.testing.workload import WorkloadBuilder
from tests.cli.conftest import DFOS_RELAY, RelayProcess, clean_env, postgres_schema_url
from tests.peering.mesh import Mesh, assert_converged, post_all
from tests.support.relay_api import PAST_MS

__all__ = ["postgres_schema_url"]  # the fixture, shared with the CLI tests


def forked_workloads(n: int) -> tuple[list[str], list[list[str]]]:
    """Shared ops, then for each of ``n`` relays its own fork and extras."""
    b = WorkloadBuilder(seed=61, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    b.content_update(chain)
    fork = chain.ops[-1]
    shared = list(b.tokens)
    own = []
    for _ in range(n):
        start = len(b.tokens)
        b.content_update(chain, parent=fork)
        someone = b.identity()
        b.beacon(someone)
        b.artifact(someone)
        b.countersign(someone, fork[0])
        own.append(b.tokens[start:])
    return shared, own


async def converged_within(mesh: Mesh, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            await assert_converged(mesh)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)


async def test_three_relay_processes_on_three_stores_converge_by_reconciliation_alone(
    tmp_path: Path, postgres_schema_url: str
) -> None:
    stores = ["memory://", f"sqlite:///{tmp_path / 'b.db'}", postgres_schema_url]
    shared, own = forked_workloads(3)
    procs: list[RelayProcess] = []
    try:
        for store in stores:
            procs.append(RelayProcess(["--store", store, "--log-level", "warning"]))
        async with httpx.AsyncClient(timeout=10) as http:
            for proc, ops in zip(procs, own, strict=True):
                await post_all(http, proc.url, shared + ops)
            for proc in procs:
                proc.stop()
            # the same stores, now peered for reconciliation only
            urls = [p.url for p in procs]
            again = []
            for i, store in enumerate(stores[1:], start=1):
                peers = [a for u in urls if u != urls[i] for a in ("--peer", f"{u}#reconcile")]
                args = ["--store", store, "--reconcile-interval", "0.3", *peers]
                again.append(RelayProcess(args, port=procs[i].port))
            # the memory relay lost its ops with its process: it starts empty
            peers = [a for u in urls[1:] for a in ("--peer", f"{u}#reconcile")]
            first = RelayProcess(
                ["--store", "memory://", "--reconcile-interval", "0.3", *peers], port=procs[0].port
            )
            procs = [first, *again]
            await post_all(http, first.url, shared + own[0])
            await converged_within(Mesh(urls, [], None, http), 40)  # type: ignore[arg-type]
            metrics = (await http.get(first.url + "/metrics")).text
            assert "dfos_relay_reconcile_rounds_total" in metrics
    finally:
        for proc in procs:
            proc.stop()


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DFOS_RELAY, *args], env=clean_env(env), capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "order",
    [["reconcile", "{peer}", "--store", "{store}"],
     ["reconcile", "--store", "{store}", "{peer}", "--both"],
     ["reconcile", "--json", "{peer}", "--store", "{store}"]],
)  # fmt: skip
async def test_the_reconcile_command_beside_a_serving_relay(
    tmp_path: Path, order: list[str]
) -> None:
    shared, own = forked_workloads(2)
    db = tmp_path / "a.db"
    local = RelayProcess(["--store", f"sqlite:///{db}", "--log-level", "warning"])
    remote = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await post_all(http, local.url, shared + own[0])
            await post_all(http, remote.url, shared + own[1])
            argv = [a.format(peer=remote.url, store=f"sqlite:///{db}") for a in order]
            done = run(*argv)
            assert done.returncode == 0, done.stderr
            out = done.stdout.strip()
            if "--json" in argv:
                report = json.loads(out)
                assert report["need"] > 0 and report["pushed"] > 0 and report["error"] is None
            else:
                assert out.startswith("reconciled everything with") and "learned" in out
            await assert_converged(Mesh([local.url, remote.url], [], None, http))  # type: ignore[arg-type]
            # nothing left to do: one round, nothing learned or sent
            report = json.loads(
                run("reconcile", remote.url, "--json", "--store", f"sqlite:///{db}").stdout
            )
            assert (report["rounds"], report["need"], report["have"]) == (1, 0, 0)
            pull = run(
                "reconcile", remote.url, "--pull", "--window", "7d", "--store", f"sqlite:///{db}"
            )
            assert pull.returncode == 0 and "createdAt >=" in pull.stdout
    finally:
        local.stop()
        remote.stop()


@pytest.mark.parametrize(
    ("args", "status", "text"),
    [(["reconcile", "ftp://nowhere"], 1, "peer url must be"),
     (["reconcile", "http://127.0.0.1:9", "--window", "soon"], 2, "--window"),
     (["reconcile", "http://127.0.0.1:9", "--pull", "--push"], 2, "not allowed with"),
     (["reconcile", "http://127.0.0.1:9"], 1, "http://127.0.0.1:9")],
)  # fmt: skip
def test_reconcile_command_errors_are_one_line(
    tmp_path: Path, args: list[str], status: int, text: str
) -> None:
    done = run(*args, "--store", f"sqlite:///{tmp_path / 'x.db'}")
    assert done.returncode == status
    assert done.stderr.count("\n") == 1 and text in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
