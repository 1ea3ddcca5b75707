"""The fingerprint index of a relay reflects commits made by any process
sharing its store before it answers a round: two relay engines on one
SQLite file or one Postgres schema, and `dfos-relay serve --workers 2`
on Postgres, where a round may reach either worker. Ops purged by one
engine leave the other's index too (the purge starts a new feed epoch)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from relay import create_relay
from relay.engine import Relay
from relay.protocol.negentropy import Negentropy, VectorStorage, id_from_cid
from relay.testing.workload import mixed_workload
from stores.postgres import PostgresStore
from stores.sqlite import SqliteStore
from tests.cli.conftest import RelayProcess, postgres_schema_url
from tests.peering.mesh import post_all
from tests.support.asgi_client import asgi_client
from tests.support.backends import PG_URL, pg_schema
from tests.support.relay_api import PAST_MS, log_cids

__all__ = ["postgres_schema_url"]  # the fixture, shared with the CLI tests
OCTET = {"content-type": "application/octet-stream"}


def shared_store(backend: str, tmp_path: Path, schema: str) -> SqliteStore | PostgresStore:
    """A new handle on the storage the test's engines share."""
    if backend == "sqlite":
        return SqliteStore(tmp_path / "shared.db")
    return PostgresStore(PG_URL, schema=schema, pool_max=2)


async def need_from_empty(http: httpx.AsyncClient, url: str) -> set[bytes]:
    """What a client holding nothing learns it needs: the server's whole set."""
    client = Negentropy(VectorStorage([]))
    message: bytes | None = client.initiate()
    need: set[bytes] = set()
    while message is not None:
        response = await http.post(url + "/sync/negentropy", content=message, headers=OCTET)
        step = client.step(response.content)
        need.update(step.need)
        message = step.message
    return need


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_second_engine_on_the_same_store_answers_with_the_firsts_commits(
    tmp_path: Path, backend: str
) -> None:
    async with pg_schema() as schema:

        def open_store() -> SqliteStore | PostgresStore:
            return shared_store(backend, tmp_path, schema)

        writer, reader = create_relay(open_store()), create_relay(open_store())
        async with writer.running(), reader.running():
            await reader.sync_index.ready()  # built before the writer's commits
            tokens = mixed_workload(80, seed=71, now_ms=PAST_MS)
            await writer.ingest(tokens)
            async with (
                asgi_client(reader.app, base_url="http://reader.test") as http,
                asgi_client(writer.app, base_url="http://w.test") as w,
            ):
                need = await need_from_empty(http, "http://reader.test")
                cids = await log_cids(w)
            assert need == {id_from_cid(c) for c in cids}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_purge_by_one_engine_leaves_the_others_index(tmp_path: Path, backend: str) -> None:
    from tests.support.whole_purge import plan_purge

    async with pg_schema() as schema:

        def open_store() -> SqliteStore | PostgresStore:
            return shared_store(backend, tmp_path, schema)

        purger, other = create_relay(open_store()), create_relay(open_store())
        async with purger.running(), other.running():
            await purger.ingest(mixed_workload(40, seed=72, now_ms=PAST_MS))
            before = (await other.sync_index.ready()).size()
            page = await purger.store.read_log(None, 1000)
            did = next(e.chain_id for e in page.entries if e.kind == "identity-op")
            async with purger.store.moderating() as session:
                batch = await plan_purge(purger.store, did, PAST_MS)
                await session.apply_moderation(batch)
            assert batch.operations
            after = (await other.sync_index.ready()).size()
            assert after == before - len(batch.operations) == await count_live(other)


async def count_live(relay: Relay) -> int:
    return len((await relay.store.read_log(None, 10_000)).entries)


async def test_every_worker_answers_with_every_workers_commits(postgres_schema_url: str) -> None:
    relay = RelayProcess(
        ["--store", postgres_schema_url, "--workers", "2", "--log-level", "warning"]
    )
    try:
        tokens = mixed_workload(120, seed=72, now_ms=PAST_MS)
        for start in range(0, len(tokens), 20):
            # a new connection per request: both workers serve some of them
            async with httpx.AsyncClient(timeout=10) as http:
                await post_all(http, relay.url, tokens[start : start + 20])
            async with httpx.AsyncClient(base_url=relay.url, timeout=10) as http:
                expected = {id_from_cid(c) for c in await log_cids(http)}
            for _ in range(3):
                async with httpx.AsyncClient(timeout=10) as http:
                    assert await need_from_empty(http, relay.url) == expected
    finally:
        relay.stop()
