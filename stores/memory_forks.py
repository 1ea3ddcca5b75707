"""A chain's tips and one branch of it in the memory store (``stores.base.ForkReader``).

Both reads work on the op table's columns (CID, parent, kind, chain) and
build entries only for what they answer: the tips (of one chain or of
several), or the window of the
branch asked for. Tips scan the chain's positions once (ints and strings
already held, no record built); a branch walks parent links from its last
op through the CID index.
"""

from __future__ import annotations

from collections.abc import Collection

from stores.base import BranchPage, FeedEntry, OperationKind, UnknownCursorError
from stores.memory_rows import KINDS, ChainSeqs, OpTable, seqs_of


class MemoryForks:
    _ops: OpTable
    _chain_log: dict[str, ChainSeqs]

    def _chain_member(
        self, seq: int | None, chain_id: str, kind: OperationKind, until: int
    ) -> bool:
        ops = self._ops
        return (
            seq is not None
            and seq <= until
            and ops.chain[seq - 1] == chain_id
            and KINDS[ops.kind[seq - 1]] == kind
        )

    async def read_chain_tips(
        self, chain_id: str, kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        ops = self._ops
        code = KINDS.index(kind)
        seqs = [
            s
            for s in seqs_of(self._chain_log, chain_id)
            if s <= until_seq and ops.cid[s - 1] is not None and ops.kind[s - 1] == code
        ]
        parents = {ops.parent[s - 1] for s in seqs}
        return [ops.feed_entry(s) for s in seqs if ops.cid[s - 1] not in parents]

    async def read_chains_tips(
        self, chain_ids: Collection[str], kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        out: list[FeedEntry] = []
        for chain_id in set(chain_ids):
            out.extend(await self.read_chain_tips(chain_id, kind, until_seq))
        out.sort(key=lambda e: e.seq)
        return out

    async def read_branch(
        self,
        chain_id: str,
        kind: OperationKind,
        cid: str,
        until_seq: int,
        after: str | None,
        limit: int,
    ) -> BranchPage | None:
        ops = self._ops
        seq = ops.seq_of.get(cid)
        if seq is None or not self._chain_member(seq, chain_id, kind, until_seq):
            return None
        path = [seq]  # last op first
        while (parent := ops.parent[path[-1] - 1]) is not None and len(path) < until_seq:
            up = ops.seq_of.get(parent)
            if up is None or not self._chain_member(up, chain_id, kind, until_seq):
                break  # a parent outside the chain (or purged): the walk's root
            path.append(up)
        path.reverse()
        start = 0
        if after is not None:
            at = next((i for i, s in enumerate(path) if ops.cid[s - 1] == after), None)
            if at is None:
                raise UnknownCursorError(after)
            start = at + 1
        window = path[start : start + max(limit, 0)]
        return BranchPage(len(path), start, tuple(ops.feed_entry(s) for s in window))
