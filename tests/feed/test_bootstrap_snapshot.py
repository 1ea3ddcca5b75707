"""Bootstrap: STATUS with snapshot seq S, one SNAPSHOT per retained current
item in (createdAt, CID) order (a forked chain shows all of its tips and
which is the head), EOSE with S; then a tail from S misses nothing and
repeats nothing, even while ingestion runs concurrently."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay import create_relay
from relay.testing.workload import WorkloadBuilder, mixed_workload
from stores.sqlite import SqliteStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

from .conftest import Served, read_sse


async def test_forked_chain_shows_every_tip_and_its_head(served: Served) -> None:
    b = WorkloadBuilder(seed=71, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    genesis = (chain.genesis_cid, chain.ops[0][1])
    b.content_update(chain)  # one branch
    b.content_update(chain, parent=genesis)  # a fork from genesis
    await served.relay.ingest(b.tokens)
    events = await read_sse(served.url, "mode=bootstrap&kinds=content-op")
    status, *snapshots, eose = events
    assert status[0] == "status" and status[1]["snapshotSeq"] == eose[1]["seq"]
    [item] = [e[1] for e in snapshots if e[1]["chainId"] == chain.content_id]
    assert len(item["tips"]) == 2
    [head] = [t for t in item["tips"] if t["head"]]
    assert head["cid"] == item["headCID"] == item["state"]["headCID"]
    # the head rule: highest createdAt, then highest CID
    assert (head["createdAt"], head["cid"]) == max((t["createdAt"], t["cid"]) for t in item["tips"])
    async with httpx.AsyncClient() as http:
        served_content = (await http.get(f"{served.url}/content/{chain.content_id}")).json()
    assert served_content["headCID"] == item["headCID"]


async def test_snapshot_order_and_latest_beacon_only(served: Served) -> None:
    b = WorkloadBuilder(seed=72, start_ms=PAST_MS)
    alice = b.identity()
    b.beacon(alice)
    latest = b.beacon(alice)
    b.artifact(alice)
    await served.relay.ingest(b.tokens)
    events = await read_sse(served.url, "mode=bootstrap")
    items = [e[1] for e in events if e[0] == "snapshot"]
    beacons = [i for i in items if i["kind"] == "beacon" and i["chainId"] == alice.did]
    assert [i["cid"] for i in beacons] == [latest]
    keys = [(i["createdAt"], i.get("genesisCID", i.get("cid"))) for i in items]
    assert keys == sorted(keys)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    before=st.integers(0, 40),
    during=st.integers(1, 40),
    batch=st.integers(1, 7),
)
def test_bootstrap_then_tail_misses_nothing_and_repeats_nothing(
    seed: int, before: int, during: int, batch: int
) -> None:
    asyncio.run(_handoff(seed, before, during, batch))


async def _handoff(seed: int, before: int, during: int, batch: int) -> None:
    tokens = mixed_workload(before + during, seed=seed, now_ms=PAST_MS)
    # SQLite: every store call really suspends, so ingestion interleaves with
    # the bootstrap's reads.
    with tempfile.TemporaryDirectory() as tmp:
        await _handoff_on(SqliteStore(Path(tmp) / "r.db"), tokens, before, batch)


async def _handoff_on(store: SqliteStore, tokens: list[str], before: int, batch: int) -> None:
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest(tokens[:before])
        async with asgi_client(relay.app, base_url="http://r") as http:

            async def ingest_rest() -> None:
                rest = tokens[before:]
                for i in range(0, len(rest), batch):
                    await relay.ingest(rest[i : i + batch])
                    await asyncio.sleep(0)

            writer = asyncio.create_task(ingest_rest())
            boot = _events((await http.get("/changes", params={"mode": "bootstrap"})).text)
            await writer
            snapshot_seq = boot[-1][1]["seq"]
            assert boot[0][1]["snapshotSeq"] == snapshot_seq
            tail = _events((await http.get("/changes", params={"since": snapshot_seq})).text)
        final = await relay.store.read_seq_range(0, 10**9, 10**6)
    tail_seqs = [d["seq"] for e, d in tail if e == "op"]
    # the tail holds exactly the ops after S, each once, in order
    assert tail_seqs == list(range(snapshot_seq + 1, len(final) + 1))
    # the snapshot holds every chain, and only what was sequenced by S
    items = [d for e, d in boot if e == "snapshot"]
    assert all(i["seq"] <= snapshot_seq for i in items)
    chain_kinds = ("identity-op", "content-op")
    chains_by_s = {e.chain_id for e in final[:snapshot_seq] if e.kind in chain_kinds}
    assert {i["chainId"] for i in items if i["kind"] in ("identity", "content")} == chains_by_s
    artifacts_by_s = {e.cid for e in final[:snapshot_seq] if e.kind in ("artifact", "countersign")}
    assert {i["cid"] for i in items if i["kind"] in ("artifact", "countersign")} == artifacts_by_s


def _events(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event = data = None
        for line in block.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if event is not None and data is not None:
            out.append((event, json.loads(data)))
    return out
