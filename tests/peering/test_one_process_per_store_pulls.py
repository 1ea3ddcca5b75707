"""Of the processes on one store, only the holder of its pull lease follows
and polls peers: a live peer's feed is followed once, not once per worker of
``dfos-relay serve --workers N`` or of ``hypercorn relay.asgi:app --workers
N``, every worker's ``GET /peers`` shows that in-link as the store has it,
and when the process that pulls is killed another takes over. Real
processes throughout: the peer, the relays, Postgres and SQLite files."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.testing.server import free_port
from relay.testing.workload import mixed_workload
from tests.cli.conftest import RelayProcess, clean_env, postgres_schema_url  # noqa: F401
from tests.support.relay_api import PAST_MS

HYPERCORN = str(Path(sys.executable).parent / "hypercorn")
SSE_SUBSCRIBERS = re.compile(r'^dfos_relay_feed_subscribers\{transport="sse"\} (\S+)$', re.M)


def sse_subscribers(url: str) -> float:
    found = SSE_SUBSCRIBERS.search(httpx.get(url + "/metrics", timeout=10).text)
    return float(found.group(1)) if found else 0.0


def logged(url: str) -> set[str]:
    page = httpx.get(url + "/log", params={"limit": 1000}, timeout=10).json()
    return {entry["cid"] for entry in page["entries"]}


def in_link_states(url: str, peer: str) -> list[str]:
    """The in-link's state per answer, over fresh connections (the kernel
    spreads them over the workers)."""
    states = []
    for _ in range(8):
        with httpx.Client(timeout=10) as http:
            listed = http.get(url + "/peers").json()["peers"]
        links = [link for p in listed if p["url"] == peer for link in p["links"]]
        states += [link["state"] for link in links if link["direction"] == "in"] or ["none"]
    return states


def replicated(relay_url: str, peer_url: str, tokens: list[str], timeout_s: float = 30) -> None:
    """Post ``tokens`` to the peer; wait until the relay logs all of them."""
    posted = httpx.post(peer_url + "/operations", json={"operations": tokens}, timeout=30)
    wanted = {r["cid"] for r in posted.json()["results"]}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not wanted <= logged(relay_url):
        time.sleep(0.2)
    assert wanted <= logged(relay_url)


def followed_once_and_told_alike(relay_url: str, peer_url: str) -> None:
    assert sse_subscribers(peer_url) == 1.0  # followed once, not once per worker
    deadline = time.monotonic() + 30
    states: list[str] = []
    while time.monotonic() < deadline:
        states = in_link_states(relay_url, peer_url)
        if set(states) == {"live"}:
            break
        time.sleep(0.5)
    assert set(states) == {"live"}, states  # every worker tells the same


@pytest.mark.postgres
def test_serve_workers_on_postgres_follow_a_live_peer_once(
    postgres_schema_url: str,  # noqa: F811
) -> None:
    peer = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    relay = None
    try:
        args = ["--store", postgres_schema_url, "--workers", "2", "--log-level", "warning"]
        relay = RelayProcess([*args, "--peer", f"{peer.url}#live"])
        with relay.explained():
            replicated(relay.url, peer.url, mixed_workload(30, seed=91, now_ms=PAST_MS))
            followed_once_and_told_alike(relay.url, peer.url)
    finally:
        if relay is not None:
            relay.stop()
        peer.stop()


def test_hypercorn_workers_on_sqlite_follow_a_live_peer_once(tmp_path: Path) -> None:
    peer = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    port = free_port()
    env = clean_env(
        {
            "DFOS_RELAY_STORE": f"sqlite:///{tmp_path}/relay.db",
            "DFOS_RELAY_PEERS": f"{peer.url}#live",
            "DFOS_RELAY_LOG_LEVEL": "warning",
        }
    )
    command = [HYPERCORN, "relay.asgi:app", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    log = tmp_path / "hypercorn.log"
    with log.open("w") as out:
        relay = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        up_within(url, 30)
        replicated(url, peer.url, mixed_workload(30, seed=92, now_ms=PAST_MS))
        followed_once_and_told_alike(url, peer.url)
    except BaseException as exc:
        exc.add_note(f"hypercorn output:\n{log.read_text()}")
        raise
    finally:
        relay.terminate()
        relay.wait(timeout=30)
        peer.stop()


def test_another_process_takes_over_when_the_one_that_pulls_is_killed(tmp_path: Path) -> None:
    peer = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    args = ["--store", f"sqlite:///{tmp_path}/relay.db", "--peer", f"{peer.url}#live"]
    relays: list[RelayProcess] = []
    try:
        relays = [RelayProcess([*args, "--log-level", "info"]) for _ in range(2)]
        puller = wait_for(lambda: [r for r in relays if PULLS in r.output()], 30)
        assert len(puller) == 1, [r.output() for r in relays]  # one of the two pulls
        (survivor,) = [r for r in relays if r is not puller[0]]
        with survivor.explained():
            replicated(survivor.url, peer.url, mixed_workload(10, seed=93, now_ms=PAST_MS))
            puller[0].proc.kill()  # no goodbye: the lease goes with the process
            puller[0].stop()
            wait_for(lambda: PULLS in survivor.output(), 30)
            fresh = mixed_workload(10, seed=94, now_ms=PAST_MS)
            replicated(survivor.url, peer.url, fresh)  # followed by the survivor now
    finally:
        for relay in relays:
            relay.stop()
        peer.stop()


PULLS = "now pulls from peers"


def wait_for(found: Callable[[], Any], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = found()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def up_within(url: str, timeout_s: float) -> None:
    def healthy() -> bool:
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    assert wait_for(healthy, timeout_s), "hypercorn did not come up"
