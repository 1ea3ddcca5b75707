"""With two hypercorn workers on Postgres a subscriber on one sees commits
made by the other within a second; ``dfos-relay follow`` prints the feed as
JSON Lines and fails in one line on a gap."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import httpx
import pytest

from relay.testing.workload import mixed_workload
from tests.cli.conftest import DFOS_RELAY, RelayProcess, clean_env
from tests.support.relay_api import PAST_MS


@pytest.mark.postgres
def test_two_workers_on_postgres_wake_each_others_subscribers(postgres_schema_url: str) -> None:
    relay = RelayProcess(
        ["--store", postgres_schema_url, "--workers", "2", "--log-level", "warning"]
    )
    try:
        asyncio.run(_cross_worker(relay.url))
    finally:
        relay.stop()


async def _cross_worker(url: str) -> None:
    from peer.feed import FollowOptions, follow

    tokens = mixed_workload(60, seed=82, now_ms=PAST_MS)
    batches = [tokens[i : i + 5] for i in range(0, len(tokens), 5)]
    committed: dict[str, float] = {}
    arrived: dict[str, float] = {}
    caught_up = asyncio.Event()

    async def consume() -> None:
        async for event in follow(url, options=FollowOptions(live=True)):
            if event.kind == "eose":
                caught_up.set()
            if event.kind == "op":
                arrived[event.data["cid"]] = time.monotonic()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(caught_up.wait(), 20)
    for batch in batches:
        # a new connection per batch: the kernel spreads them over both workers
        async with httpx.AsyncClient() as http:
            answer = await http.post(f"{url}/operations", json={"operations": batch})
        now = time.monotonic()
        for result in answer.json()["results"]:
            if result["status"] == "new":
                committed[result["cid"]] = now
    for _ in range(300):
        if set(committed) <= set(arrived):
            break
        await asyncio.sleep(0.05)
    task.cancel()
    # an event may even arrive before the POST answer: that counts as 0
    latencies = [max(0.0, arrived[cid] - at) for cid, at in committed.items()]
    assert len(latencies) == len(tokens) and max(latencies) < 1.0, max(latencies)


def test_follow_command_prints_json_lines() -> None:
    relay = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    try:
        tokens = mixed_workload(10, seed=83, now_ms=PAST_MS)
        httpx.post(relay.url + "/operations", json={"operations": tokens}, timeout=30)
        done = subprocess.run(
            [DFOS_RELAY, "follow", relay.url, "--no-live", "--kinds", "identity-op"],
            env=clean_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert lines[0]["event"] == "status" and lines[-1]["event"] == "eose"
        ops = [line for line in lines if line["event"] == "op"]
        assert ops and all(line["data"]["kind"] == "identity-op" for line in ops)
        assert all(line["token"] == line["data"]["token"] for line in ops)
        gone = subprocess.run(
            [DFOS_RELAY, "follow", relay.url, "--since", "zz.1", "--no-live"],
            env=clean_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert gone.returncode == 1 and gone.stderr.count("\n") == 1
        assert "bootstrap" in gone.stderr
    finally:
        relay.stop()
