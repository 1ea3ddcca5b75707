"""With several workers (``dfos-relay serve --workers N``) only the first
pulls from peers: a live peer's feed is followed once, not once per worker,
and every worker's ``GET /peers`` shows that in-link as the store has it.
Real processes: the peer and a two-worker relay on Postgres."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from relay.testing.workload import mixed_workload
from tests.cli.conftest import RelayProcess, postgres_schema_url  # noqa: F401
from tests.support.relay_api import PAST_MS

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


@pytest.mark.postgres
def test_only_the_first_worker_follows_a_live_peer(postgres_schema_url: str) -> None:  # noqa: F811
    peer = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    relay = None
    try:
        args = ["--store", postgres_schema_url, "--workers", "2", "--log-level", "warning"]
        relay = RelayProcess([*args, "--peer", f"{peer.url}#live"])
        tokens = mixed_workload(30, seed=91, now_ms=PAST_MS)
        posted = httpx.post(peer.url + "/operations", json={"operations": tokens}, timeout=30)
        wanted = {r["cid"] for r in posted.json()["results"]}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not wanted <= logged(relay.url):
            time.sleep(0.2)
        assert wanted <= logged(relay.url)  # replicated by the worker that pulls
        assert sse_subscribers(peer.url) == 1.0  # followed once, not once per worker
        states: list[str] = []
        while time.monotonic() < deadline:
            states = in_link_states(relay.url, peer.url)
            if set(states) == {"live"}:
                break
            time.sleep(0.5)
        assert set(states) == {"live"}, states  # every worker tells the same
    finally:
        if relay is not None:
            relay.stop()
        peer.stop()
