"""What the write gate's ban list costs each worker once a second, with
many bans (``relay.admin.bans``).

``--bans`` bans are written in one statement (through the store's
triggers, as any writer's are). Then, per backend, the median of
``--repeat`` runs of:

- the refresh as it was: every ban read (``list_bans()``) into a dict;
- a stale refresh with nothing changed since the last (``BanList``);
- a stale refresh after one ban written by another handle on the store;
- the first read (every ban, once per process start).

    PYTHONPATH=. .venv/bin/python -m bench.ban_refresh --bans 100000
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg

from bench.common import bench_store
from relay.admin.bans import BAN_REFRESH_S, BanList
from stores.base import RelayStore
from stores.memory import MemoryStore
from stores.moderation import BanRecord
from stores.postgres import PostgresStore
from stores.sqlite import SqliteStore

SQLITE_BANS = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
    "INSERT INTO bans (did, reason, banned_at_ms, banned_by) "
    "SELECT printf('did:dfos:spam%07d', i), 'spam', 1000, 'did:dfos:op' FROM n"
)
PG_BANS = (
    "INSERT INTO bans (did, reason, banned_at_ms, banned_by) "
    "SELECT 'did:dfos:spam' || lpad(i::text, 7, '0'), 'spam', 1000, 'did:dfos:op' "
    "FROM generate_series(1, $1) AS i"
)


async def write_bans(store: RelayStore, n: int) -> None:
    if isinstance(store, MemoryStore):
        for i in range(n):
            await store.put_ban(BanRecord(f"did:dfos:spam{i:07}", "spam", 1000, "did:dfos:op"))
    elif isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as db:
            db.execute(SQLITE_BANS, (n,))
    else:
        assert isinstance(store, PostgresStore)
        conn = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema or ""})
        try:
            await conn.execute(PG_BANS, n)
            await conn.execute("ANALYZE")
        finally:
            await conn.close()


async def median_ms(repeat: int, step: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await step()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


async def measure(name: str, bans: int, repeat: int) -> dict[str, float]:
    async with bench_store(name) as store:
        await store.open()
        try:
            await write_bans(store, bans)

            async def full_read() -> None:  # BanList.refresh before: every ban, each time
                _ = {ban.did: ban for ban in await store.list_bans()}

            clock = Clock()
            ban_list = BanList(store, clock=clock)
            started = time.perf_counter()
            await ban_list.refresh()
            first = (time.perf_counter() - started) * 1000
            assert len(ban_list.records()) == bans

            async def stale_refresh() -> None:
                clock.now += BAN_REFRESH_S
                await ban_list.refresh_if_stale()

            n = 0

            async def one_ban_then_refresh() -> float:
                nonlocal n
                n += 1
                await store.put_ban(BanRecord(f"did:dfos:new{n}", "abuse", 2000, "did:dfos:op"))
                started = time.perf_counter()
                await stale_refresh()
                return (time.perf_counter() - started) * 1000

            before = await median_ms(repeat, full_read)
            unchanged = await median_ms(repeat, stale_refresh)
            changed = statistics.median([await one_ban_then_refresh() for _ in range(repeat)])
            assert ban_list.lookup(f"did:dfos:new{n}") == "abuse"
        finally:
            await store.close()
    return {"before": before, "unchanged": unchanged, "one_change": changed, "first": first}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bans", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    args = parser.parse_args()
    print(f"{args.bans} bans, median of {args.repeat} (ms)")
    print(
        f"{'store':9} {'before':>9} {'unchanged':>10} {'one change':>11} {'first':>8} {'ratio':>8}"
    )
    for name in args.backends.split(","):
        r = await measure(name, args.bans, args.repeat)
        ratio = r["before"] / max(r["unchanged"], 1e-6)
        print(
            f"{name:9} {r['before']:9.2f} {r['unchanged']:10.3f} {r['one_change']:11.3f} "
            f"{r['first']:8.1f} {ratio:7.0f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
