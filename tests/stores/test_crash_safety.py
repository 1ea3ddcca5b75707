"""Crash safety: a relay process is SIGKILLed at random points while it
ingests a workload, then restarted on the same SQLite file / Postgres schema.

After every restart: every op whose POST answered ``new`` is served, the log
read before the kill is an unchanged prefix of the log after it, and the
relay DID is the same. Some dependencies are held back until the end, so
their dependants wait in the pending buffer across kills; posting the held
back ops after the last restart sequences them all.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from relay.testing.workload import mixed_workload
from tests.support.backends import PG_URL, pg_schema, selected_backends
from tests.support.relay_process import RelayProcess

DURABLE = [b for b in ("sqlite", "postgres") if b in selected_backends()]
KILLS = 3
BATCH = 20


@asynccontextmanager
async def durable_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/relay.db"
        return
    async with pg_schema() as schema:
        yield f"{PG_URL}?schema={schema}"


def plan(tokens: list[str], rng: random.Random) -> tuple[list[list[str]], list[str]]:
    """Batches to post (some shuffled) and the held-back tokens (every 40th
    op: their dependants wait in the pending buffer until the end)."""
    held = tokens[7::40]
    held_set = set(held)
    rest = [t for t in tokens if t not in held_set]
    batches = [rest[i : i + BATCH] for i in range(0, len(rest), BATCH)]
    for batch in batches[::3]:
        rng.shuffle(batch)
    return batches, held


async def read_log(client: httpx.AsyncClient, url: str) -> list[str]:
    cids: list[str] = []
    after: str | None = None
    while True:
        params = {"limit": "1000", **({"after": after} if after else {})}
        body = (await client.get(f"{url}/log", params=params)).json()
        cids += [e["cid"] for e in body["entries"]]
        after = body["cursor"]
        if after is None:
            return cids


async def relay_did(client: httpx.AsyncClient, url: str) -> str:
    return str((await client.get(f"{url}/.well-known/dfos-relay")).json()["did"])


async def post_until_killed(
    client: httpx.AsyncClient,
    relay: RelayProcess,
    batches: list[list[str]],
    new: set[str],
    kill_after: float,
) -> int:
    """Post batches in order; SIGKILL the relay after ``kill_after`` seconds.
    Returns how many batches got a complete answer."""
    loop = asyncio.get_running_loop()
    killer = loop.call_later(kill_after, relay.kill)
    done = 0
    try:
        for batch in batches:
            try:
                r = await client.post(f"{relay.url}/operations", json={"operations": batch})
            except httpx.HTTPError:
                break
            new.update(x["cid"] for x in r.json()["results"] if x["status"] == "new")
            done += 1
    finally:
        killer.cancel()
    return done


@pytest.mark.parametrize("backend", DURABLE)
async def test_sigkill_loses_nothing_accepted(backend: str, tmp_path: Path) -> None:
    rng = random.Random(4)
    tokens = mixed_workload(500, seed=11)
    batches, held = plan(tokens, rng)
    new: set[str] = set()
    async with durable_url(backend, tmp_path) as url, httpx.AsyncClient(timeout=30) as client:
        relay = RelayProcess(url)
        await relay.start()
        did = await relay_did(client, relay.url)
        log_before: list[str] = []
        try:
            for _ in range(KILLS):
                done = await post_until_killed(
                    client, relay, batches, new, kill_after=rng.uniform(0.3, 1.2)
                )
                relay.kill()
                batches = batches[done:]  # the interrupted batch is re-posted
                await relay.start()
                assert await relay_did(client, relay.url) == did
                log_after = await read_log(client, relay.url)
                assert log_after[: len(log_before)] == log_before, "log positions changed"
                missing = new - set(log_after)
                assert not missing, f"{len(missing)} ops answered new were lost"
                for cid in rng.sample(sorted(new), min(5, len(new))):
                    assert (await client.get(f"{relay.url}/operations/{cid}")).status_code == 200
                log_before = log_after
            for batch in batches:
                await client.post(f"{relay.url}/operations", json={"operations": batch})
            waiting = len(tokens) - len(await read_log(client, relay.url)) - len(held)
            assert waiting > 0, "expected dependants of held-back ops in the pending buffer"
            # one more crash with ops pending, then release the held-back deps
            relay.kill()
            await relay.start()
            r = await client.post(f"{relay.url}/operations", json={"operations": held})
            assert all(x["status"] in ("new", "duplicate") for x in r.json()["results"])
            final = await read_log(client, relay.url)
            assert final[: len(log_before)] == log_before
            # every op of the workload (plus the relay's own two) is sequenced
            assert len(final) == len(tokens) + 2
        finally:
            relay.kill()
