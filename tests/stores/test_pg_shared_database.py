"""Two relay processes on one Postgres schema ingest conflicting forks of the
same chains at once and end with the heads one process picks (chain-state
changes are serialized across processes by the advisory lock), with one
relay DID and one gapless log."""

from __future__ import annotations

import asyncio
import random
import time

import httpx
import pytest

from relay import create_relay
from relay.testing.workload import DAY_MS, WorkloadBuilder
from stores.memory import MemoryStore
from tests.support.backends import PG_URL, pg_schema, selected_backends
from tests.support.relay_process import RelayProcess

pytestmark = pytest.mark.skipif(
    "postgres" not in selected_backends(), reason="postgres not selected"
)


def forked_workload(seed: int) -> tuple[list[str], list[str], list[str], list[str]]:
    """(base ops, fork ops, content ids, dids): chains forked at random points."""
    rng = random.Random(seed)
    b = WorkloadBuilder(seed=seed, start_ms=time.time_ns() // 1_000_000 - 30 * DAY_MS)
    actors = [b.identity() for _ in range(3)]
    chains = [b.content_create(a) for a in actors]
    base = list(b.tokens)
    for _ in range(60):
        chain = rng.choice(chains)
        if rng.random() < 0.5:
            b.content_update(chain, parent=rng.choice(chain.ops))
        else:
            b.content_update(chain)
    for actor in actors:
        b.rotate(actor)
    return base, b.tokens[len(base) :], [c.content_id for c in chains], [a.did for a in actors]


async def heads(client: httpx.AsyncClient, url: str, ids: list[str], dids: list[str]) -> list[str]:
    out = []
    for cid in ids:
        out.append((await client.get(f"{url}/content/{cid}")).json()["headCID"])
    for did in dids:
        out.append((await client.get(f"{url}/identities/{did}")).json()["headCID"])
    return out


async def test_two_processes_pick_the_same_heads_as_one() -> None:
    base, forks, content_ids, dids = forked_workload(seed=3)
    reference = create_relay(MemoryStore())
    async with reference.running():
        await reference.ingest(base + forks)
        expected = [(await reference.store.get_chain(i)).head_cid for i in content_ids + dids]  # type: ignore[union-attr]

    async with pg_schema() as schema, httpx.AsyncClient(timeout=30) as client:
        url = f"{PG_URL}?schema={schema}"
        one, two = RelayProcess(url), RelayProcess(url)
        await asyncio.gather(one.start(), two.start())
        try:
            await client.post(f"{one.url}/operations", json={"operations": base})
            shuffled = list(forks)
            random.Random(5).shuffle(shuffled)
            halves = [shuffled[0::2], shuffled[1::2]]

            async def feed(relay: RelayProcess, tokens: list[str]) -> None:
                for i in range(0, len(tokens), 4):
                    batch = tokens[i : i + 4]
                    r = await client.post(f"{relay.url}/operations", json={"operations": batch})
                    assert r.status_code == 200

            await asyncio.gather(feed(one, halves[0]), feed(two, halves[1]))
            assert await heads(client, one.url, content_ids, dids) == expected
            assert await heads(client, two.url, content_ids, dids) == expected
            did_one = (await client.get(f"{one.url}/.well-known/dfos-relay")).json()["did"]
            did_two = (await client.get(f"{two.url}/.well-known/dfos-relay")).json()["did"]
            assert did_one == did_two
            log = (await client.get(f"{one.url}/log", params={"limit": "1000"})).json()
            cids = [e["cid"] for e in log["entries"]]
            assert len(cids) == len(set(cids)) == len(base) + len(forks) + 2
        finally:
            one.kill()
            two.kill()
