"""Shared helpers for the store benchmarks: cached signed workloads and
stores by backend name (fresh SQLite file / Postgres schema under bench/out)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from stores.memory import MemoryStore

OUT = Path(__file__).resolve().parent / "out"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def cached_workload(n: int, seed: int = 1) -> list[str]:
    """``mixed_workload(n, seed)`` cached in bench/out (signing is slow).

    Timestamps are relative to generation time (start 30 days back), so a
    cache older than ~25 days is regenerated.
    """
    OUT.mkdir(exist_ok=True)
    path = OUT / f"workload-{n}-{seed}.json"
    if path.exists() and time.time() - path.stat().st_mtime < 25 * 86400:
        tokens: list[str] = json.loads(path.read_text())
        return tokens
    started = time.perf_counter()
    tokens = mixed_workload(n, seed)
    path.write_text(json.dumps(tokens))
    print(f"generated {len(tokens)} ops in {time.perf_counter() - started:.0f}s -> {path}")
    return tokens


@asynccontextmanager
async def bench_store(name: str, pg_url: str = PG_URL) -> AsyncIterator[RelayStore]:
    """A fresh unopened store; SQLite/Postgres data is removed afterwards."""
    if name == "memory":
        yield MemoryStore()
        return
    if name == "sqlite":
        from stores.sqlite import SqliteStore

        OUT.mkdir(exist_ok=True)
        path = OUT / f"bench-{uuid.uuid4().hex[:8]}.db"
        try:
            yield SqliteStore(path)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    if name == "postgres":
        import asyncpg

        from stores.postgres import PostgresStore

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        try:
            yield PostgresStore(pg_url, schema=schema)
        finally:
            conn = await asyncpg.connect(pg_url)
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            await conn.close()
        return
    raise ValueError(name)


def run(main: object) -> None:
    asyncio.run(main)  # type: ignore[arg-type]
