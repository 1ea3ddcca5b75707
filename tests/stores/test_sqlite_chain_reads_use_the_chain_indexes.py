"""SQLite reads a chain's entries through the partial index of their kinds
(``ops_chain_log`` or ``ops_standalone``), not by walking the log up to
``until_seq``: a closure read, a late closure op of a scoped page or a DID
document costs the chain's length, not the log's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from stores.base import OperationKind
from stores.sqlite import SqliteStore
from tests.stores.conftest import append, op

LOG = 3000  # ops of other chains before the one read
STEP = 100  # SQLite VM instructions per progress tick

KINDS: list[tuple[OperationKind, ...]] = [
    ("identity-op",),
    ("countersign",),
    ("identity-op", "beacon", "artifact"),
]


async def vm_ticks(store: SqliteStore, read: Callable[[], Awaitable[object]]) -> int:
    """SQLite VM work (in ticks of ``STEP`` instructions) that ``read`` costs."""
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 0

    for reader in store._readers:
        await reader.hop(lambda db: db.set_progress_handler(tick, STEP))
    try:
        await read()
    finally:
        for reader in store._readers:
            await reader.hop(lambda db: db.set_progress_handler(None, STEP))
    return ticks[0]


@pytest.mark.parametrize("kinds", KINDS, ids=lambda k: "+".join(k))
async def test_a_chain_read_costs_the_chain_not_the_log(
    tmp_path: Path, kinds: tuple[OperationKind, ...]
) -> None:
    store = SqliteStore(tmp_path / "relay.db")
    await store.open()
    try:
        others = [op(f"o{i}", "identity-op", f"did:dfos:o{i}") for i in range(LOG)]
        for i in range(0, LOG, 500):
            await append(store, *others[i : i + 500])
        await append(store, op("g", "identity-op", "did:dfos:a"), op("b", "beacon", "did:dfos:a"))
        head = await store.log_length()
        one = await vm_ticks(store, lambda: store.read_chain_entries("did:dfos:a", kinds, head))
        many = await vm_ticks(
            store,
            lambda: store.read_chains_entries_after(
                ["did:dfos:a", "did:dfos:z"], kinds, 0, head, 100
            ),
        )
        # walking the log costs at least a few instructions per op passed
        assert one < LOG // STEP and many < LOG // STEP, (one, many)
        got = await store.read_chain_entries("did:dfos:a", kinds, head)
        assert [e.cid for e in got] == [
            c for c, k in (("g", "identity-op"), ("b", "beacon")) if k in kinds
        ]
    finally:
        await store.close()
