"""Store contract: a purge plan's reads (every op a DID signed, every op of
the chains it touched) answer every op in seq order, and a SQL store takes
them from its driver a page at a time, the loop let go in between: one fetch
had asyncpg decode all of a DID's ops at once (150 000 of them: their rows
and their records both in memory, and one long read)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest

from stores.base import RelayStore
from stores.sql import moderation
from tests.stores.conftest import append, is_durable, op

PAGE = 16
OPS = 200
A = "did:dfos:a"


class DriverReads:
    """How many rows each read of ``store``'s connections answered."""

    def __init__(self, store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: list[int] = []
        for hook in ("_reading", "_paged_reading"):
            if hasattr(store, hook):
                monkeypatch.setattr(store, hook, self._spied(getattr(store, hook)))

    def _spied(
        self, reading: Callable[[], AbstractAsyncContextManager[Any]]
    ) -> Callable[[], AbstractAsyncContextManager[Any]]:
        @asynccontextmanager
        async def spied() -> AsyncIterator[Any]:
            async with reading() as conn:
                yield _Spy(conn, self.answers)

        return spied


class _Spy:
    def __init__(self, conn: Any, answers: list[int]) -> None:
        self._conn, self._answers = conn, answers

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        rows: list[Any] = await self._conn.fetch(sql, params)
        self._answers.append(len(rows))
        return rows

    async def fetch_pages(self, sql: str, params: Sequence[Any], size: int) -> AsyncIterator[Any]:
        async for rows in self._conn.fetch_pages(sql, params, size):
            self._answers.append(len(rows))
            yield rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def test_a_dids_ops_are_read_from_the_driver_a_page_at_a_time(
    opened: RelayStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = [op("g0", "content-op", "c1")]
    chain += [op(f"g{i}", "content-op", "c1", parent=f"g{i - 1}", at=i) for i in range(1, OPS)]
    await append(opened, op("id", at=1), *chain[: OPS // 2])
    other = replace(op("other", "beacon", "did:dfos:b"), author_did="did:dfos:b")
    await append(opened, other, *chain[OPS // 2 :])
    monkeypatch.setattr(moderation, "PLAN_PAGE", PAGE, raising=False)
    reads = DriverReads(opened, monkeypatch)

    signed = await opened.operations_signed_by(A)
    in_chain = await opened.operations_in_chains(["c1"])

    assert [o.cid for o in signed] == ["id"] + [o.cid for o in chain]
    assert [o.seq for o in signed] == sorted(o.seq for o in signed)
    assert [o.cid for o in in_chain] == [o.cid for o in chain]
    assert [o.state for o in in_chain] == [o.state for o in chain]
    if is_durable(opened):
        assert max(reads.answers) <= PAGE, reads.answers
        assert sum(reads.answers) == len(signed) + len(in_chain)
