"""A store whose op reads count how often the caller looks at each op: a
purge's work must grow with the ops it reads, not with their square."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any, ClassVar

from stores.base import OperationRecord

WATCHED = ("cid", "chain_id")


class CountedOp:
    """An op a store read answered, counting every look at its CID and chain."""

    looks: ClassVar[Counter[str]] = Counter()

    def __init__(self, op: OperationRecord) -> None:
        self._op = op

    @property
    def cid(self) -> str:
        CountedOp.looks["cid"] += 1
        return self._op.cid

    @property
    def chain_id(self) -> str:
        CountedOp.looks["chain_id"] += 1
        return self._op.chain_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)


class CountingStore:
    """``store`` whose ``operations_signed_by`` / ``operations_in_chains``
    answer ``CountedOp``s; ``read``: how many ops they answered."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.read = 0
        CountedOp.looks = Counter()

    async def operations_in_chains(self, chain_ids: Collection[str]) -> list[CountedOp]:
        return self._counted(await self._store.operations_in_chains(chain_ids))

    async def operations_signed_by(self, did: str) -> list[CountedOp]:
        return self._counted(await self._store.operations_signed_by(did))

    def _counted(self, ops: list[OperationRecord]) -> list[CountedOp]:
        self.read += len(ops)
        return [CountedOp(op) for op in ops]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
