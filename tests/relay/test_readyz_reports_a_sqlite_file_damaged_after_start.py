"""``/readyz`` reports a SQLite file damaged while the relay runs: 503 with
``"store": "damaged"`` and a JSON ``error``, not ready. The relay's open
connections answer from their page caches and would not notice; the probe
reads the file anew (``stores.sqlite_probe``).

A real SQLite file, damaged on disk as a failing disk or a stray process
would: page 1 overwritten, pages deep in the file overwritten, the file
truncated (to half, to nothing). Served by hypercorn on loopback.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from relay.testing.workload import mixed_workload
from stores.sqlite import SqliteStore
from tests.support.relay_api import PAST_MS
from tests.support.served import Served, served_relay

PAGE = 4096


def overwrite_page_1(path: Path) -> None:
    with path.open("r+b") as file:
        file.write(random.Random(1).randbytes(PAGE))


def overwrite_later_pages(path: Path) -> None:
    """Every third page after the first: the schema's and tables' first pages among them."""
    noise = random.Random(2)
    with path.open("r+b") as file:
        for page in range(2, path.stat().st_size // PAGE, 3):
            file.seek(page * PAGE)
            file.write(noise.randbytes(PAGE))


def truncate_to_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def truncate_to_nothing(path: Path) -> None:
    os.truncate(path, 0)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "page-1-overwritten": overwrite_page_1,
    "later-pages-overwritten": overwrite_later_pages,
    "truncated-to-half": truncate_to_half,
    "truncated-to-nothing": truncate_to_nothing,
}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Served, SqliteStore]]:
    store = SqliteStore(tmp_path / "relay.db")
    async with served_relay(store, "hypercorn") as served:
        await served.relay.ingest(mixed_workload(500, seed=3, now_ms=PAST_MS))
        # everything in the file itself, as after any checkpoint
        await store._live_writer().fetch("PRAGMA wal_checkpoint(TRUNCATE)")
        yield served, store


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
async def test_a_damaged_file_is_not_ready(
    served: tuple[Served, SqliteStore], damage: Callable[[Path], None]
) -> None:
    s, store = served
    ready = await s.client.get("/readyz")
    assert (ready.status_code, ready.json()) == (
        200,
        {"status": "ready", "sequencer": "running", "store": "ok"},
    )
    damage(store.path)
    answer = await s.client.get("/readyz")
    assert answer.status_code == 503
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "status": "unavailable",
        "sequencer": "running",
        "store": "damaged",
        "error": "the store's data is damaged (see the relay's log)",
    }
    assert (await s.client.get("/healthz")).status_code == 200  # liveness ignores the store


async def test_a_busy_file_is_ready(served: tuple[Served, SqliteStore]) -> None:
    """Writes going on (the probe reads beside them) do not make it flap."""
    s, _ = served
    more = mixed_workload(200, seed=4, now_ms=PAST_MS)
    for start in range(0, len(more), 20):
        await s.relay.ingest(more[start : start + 20])
        assert (await s.client.get("/readyz")).status_code == 200
