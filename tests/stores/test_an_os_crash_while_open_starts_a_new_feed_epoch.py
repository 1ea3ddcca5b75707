"""The SQLite store commits with ``synchronous=NORMAL``: a process crash loses
nothing, an OS crash may lose the last commits, whose seqs are then given to
other ops. A feed consumer holding a token past the surviving head must get
an explicit gap (410, a new epoch), never a silent resume; a process crash or
a clean restart keeps the epoch.

An OS crash is made here as its effect on disk: the database as of an
earlier commit (SQLite's backup API, taken while the relay runs) replaces
the file after the relay is SIGKILLed, and the open mark beside it names
another boot (what a reboot changes)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import httpx

from relay.testing.workload import mixed_workload
from stores.sqlite import SqliteStore
from stores.sqlite_open_mark import current_boot, mark_path
from tests.support.relay_api import PAST_MS
from tests.support.relay_process import RelayProcess


async def feed_head(http: httpx.AsyncClient, url: str) -> tuple[str, int]:
    feed = (await http.get(f"{url}/.well-known/dfos-relay")).json()["changesFeed"]
    return str(feed["epoch"]), int(feed["headSeq"])


async def post(http: httpx.AsyncClient, url: str, ops: list[str]) -> None:
    answer = await http.post(f"{url}/operations", json={"operations": ops})
    assert answer.status_code == 200
    assert {r["status"] for r in answer.json()["results"]} == {"new"}


def snapshot(db: Path, to: Path) -> None:
    """The database as of its last commit (what the disk holds if the later
    commits never reach it)."""
    source, target = sqlite3.connect(db), sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def restore(snap: Path, db: Path) -> None:
    for extra in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        extra.unlink(missing_ok=True)
    db.write_bytes(snap.read_bytes())


def reboot(db: Path) -> None:
    mark = mark_path(db)
    value = json.loads(mark.read_text())
    assert value["open"] is True and value["boot"] == current_boot()
    mark.write_text(json.dumps({"boot": "a-boot-before-this-one", "open": True}))


async def test_a_token_past_commits_an_os_crash_lost_is_410(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    first, lost, later = (mixed_workload(12, seed=s, now_ms=PAST_MS) for s in (71, 72, 73))
    relay = RelayProcess(f"sqlite:///{db}")
    await relay.start()
    async with httpx.AsyncClient(timeout=30) as http:
        try:
            await post(http, relay.url, first)
            epoch, kept_head = await feed_head(http, relay.url)
            snapshot(db, tmp_path / "on-disk.db")
            await post(http, relay.url, lost)
            _, read_to = await feed_head(http, relay.url)  # a consumer read this far
        finally:
            relay.kill()
        restore(tmp_path / "on-disk.db", db)
        reboot(db)
        await relay.start()
        try:
            new_epoch, head = await feed_head(http, relay.url)
            assert head == kept_head and new_epoch != epoch
            await post(http, relay.url, later)  # these take the lost ops' seqs
            gone = await http.get(f"{relay.url}/changes", params={"since": f"{epoch}.{read_to}"})
            assert gone.status_code == 410
            assert gone.json()["epoch"] == new_epoch
        finally:
            relay.stop()


async def test_a_process_crash_keeps_the_epoch(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    relay = RelayProcess(f"sqlite:///{db}")
    await relay.start()
    async with httpx.AsyncClient(timeout=30) as http:
        try:
            await post(http, relay.url, mixed_workload(12, seed=74, now_ms=PAST_MS))
            epoch, head = await feed_head(http, relay.url)
        finally:
            relay.kill()
        await relay.start()
        try:
            assert await feed_head(http, relay.url) == (epoch, head)
            resumed = await http.get(f"{relay.url}/changes", params={"since": f"{epoch}.{head}"})
            assert resumed.status_code == 200
        finally:
            relay.stop()


async def test_a_clean_stop_then_a_reboot_keeps_the_epoch(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    store = SqliteStore(db)
    await store.open()
    epoch = await store.get_feed_epoch()
    await store.close()
    mark = json.loads(mark_path(db).read_text())
    assert mark["open"] is False
    mark_path(db).write_text(json.dumps({"boot": "a-boot-before-this-one", "open": False}))
    store = SqliteStore(db)
    await store.open()
    try:
        assert await store.get_feed_epoch() == epoch
    finally:
        await store.close()


async def test_the_last_store_out_marks_the_file_closed(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    one, two = SqliteStore(db), SqliteStore(db)
    await one.open()
    await two.open()
    epoch = await one.get_feed_epoch()
    await one.close()
    assert json.loads(mark_path(db).read_text())["open"] is True  # two is still open
    await two.close()
    assert json.loads(mark_path(db).read_text())["open"] is False
    again = SqliteStore(db)
    await again.open()
    try:
        assert await again.get_feed_epoch() == epoch
    finally:
        await again.close()


async def test_a_torn_mark_counts_as_open_under_an_unknown_boot(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    store = SqliteStore(db)
    await store.open()
    epoch = await store.get_feed_epoch()
    await store.close()
    mark_path(db).write_bytes(b'{"boot": "8a60')
    store = SqliteStore(db)
    await store.open()
    try:
        assert await store.get_feed_epoch() != epoch
    finally:
        await store.close()


async def test_two_stores_opening_side_by_side_do_not_wait_on_each_other(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    seed = SqliteStore(db)
    await seed.open()
    await seed.get_feed_epoch()
    await seed.close()
    reboot_mark = {"boot": "a-boot-before-this-one", "open": True}
    mark_path(db).write_text(json.dumps(reboot_mark))
    stores = [SqliteStore(db), SqliteStore(db)]
    await asyncio.wait_for(asyncio.gather(*(s.open() for s in stores)), 30)
    try:
        epochs = {await s.get_feed_epoch() for s in stores}
        assert len(epochs) == 1  # one store, one epoch (a new one)
    finally:
        for s in stores:
            await s.close()
