"""A memory store that counts the rows its log, chain and operation reads
return: what a scoped read or the scope guard costs, counted, not timed."""

from __future__ import annotations

from collections.abc import Collection

from stores.base import FeedEntry, OperationKind, OperationRecord
from stores.memory import MemoryStore


class CountingStore(MemoryStore):
    """A memory store that counts the rows its log and chain reads return."""

    rows = 0

    async def read_seq_range(self, after_seq: int, until_seq: int, limit: int) -> list[FeedEntry]:
        return self._count(await super().read_seq_range(after_seq, until_seq, limit))

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        return self._count(await super().read_chain_entries(chain_id, kinds, until_seq))

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        entries = await super().read_chains_entries_after(
            chain_ids, kinds, after_seq, until_seq, limit
        )
        return self._count(entries)

    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        found = await super().read_operations(cids)
        self.rows += len(found)
        return found

    def _count(self, entries: list[FeedEntry]) -> list[FeedEntry]:
        self.rows += len(entries)
        return entries
