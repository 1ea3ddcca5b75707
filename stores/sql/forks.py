"""A chain's tips and one branch of it on the SQL stores (``stores.base.ForkReader``).

``SqlForks`` is mixed into ``SqlStore``. Neither read hands the chain's
other ops to Python:

- tips: the chain's ops (``ops_chain_log``) that no op names as parent,
  the child looked up by parent CID (``ops_children``, schema v9); the tips
  of many chains likewise, in one statement;
- a branch: walked from its last op to genesis along parent CIDs by one
  recursive query (the unique CID index), which answers the branch's length,
  where ``after`` sits on it and only the rows of the window asked for.

Both look ops up by CID alone. A child or parent is an op of the same chain
and kind (a chain op names the op before it in its own chain; ops of other
kinds name none), so the chain's terms are not repeated there: they would let
a planner without fresh statistics (a table that just grew) scan the chain
once per op of it. The branch checks them on the ops it walked instead.

The database still visits each op of the branch (the walk) or of the chain
(one index probe per op) as index entries; the rows read and decoded stay
bounded by the answer. The walk's depth is capped by ``until_seq`` (a branch
holds at most that many ops), so corrupt parent links cannot recurse forever.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from stores.base import BranchPage, FeedEntry, OperationKind, UnknownCursorError
from stores.sql import rows as R
from stores.sql.conn import Conn
from stores.sql.dialect import Dialect
from stores.sql.queries import CHAIN_KINDS_SQL

CHAINS_PER_READ = 2000  # chain ids per batch read: bounded parameters and result sets

_FEED_COLS_OF_O = (
    "o.pos, o.cid, o.token, o.kind, o.chain_id, o.author_did, o.created_at_ms, "
    "o.parent_cid, o.state"
)


@dataclass(frozen=True, slots=True)
class ForkQueries:
    # chain_id, kind, until, until (of the child)
    tips: str = (
        f"SELECT {_FEED_COLS_OF_O} FROM ops o WHERE o.chain_id = ? AND o.kind = ? "
        f"AND o.pos <= ? AND o.{CHAIN_KINDS_SQL} AND NOT EXISTS (SELECT 1 FROM ops c "
        "WHERE c.parent_cid = o.cid AND c.pos <= ?) ORDER BY o.pos"
    )
    # chain_ids, kind, until, until (of the child)
    tips_of_chains: str = (
        f"SELECT {_FEED_COLS_OF_O} FROM ops o WHERE o.chain_id {{IN}} AND o.kind = ? "
        f"AND o.pos <= ? AND o.{CHAIN_KINDS_SQL} AND NOT EXISTS (SELECT 1 FROM ops c "
        "WHERE c.parent_cid = o.cid AND c.pos <= ?) ORDER BY o.pos"
    )
    # cid, depth cap; chain_id, kind, until; after; limit. The branch ends at
    # ``cut``, before the first op walked outside the chain, its kind or the
    # snapshot. ``n`` counts back from the branch's last op (0);
    # the window is the ``limit`` ops before ``after`` (before the genesis
    # end without it).
    branch: str = (
        "WITH RECURSIVE up (pos, cid, parent_cid, chain_id, kind, n) AS ("
        "SELECT pos, cid, parent_cid, chain_id, kind, CAST(0 AS {BIGINT}) FROM ops WHERE cid = ? "
        "UNION ALL SELECT p.pos, p.cid, p.parent_cid, p.chain_id, p.kind, up.n + 1 "
        "FROM up JOIN ops p ON p.cid = up.parent_cid WHERE up.n < ?), "
        "span (cut, total, mark) AS (SELECT MIN(CASE WHEN chain_id <> ? OR kind <> ? "
        "OR pos > ? THEN n END), COUNT(*), MAX(CASE WHEN cid = ? THEN n END) FROM up), "
        "edge (total, mark) AS (SELECT COALESCE(cut, total), "
        "CASE WHEN mark < COALESCE(cut, total) THEN mark END FROM span) "
        f"SELECT edge.total, edge.mark, {_FEED_COLS_OF_O} FROM edge "
        "LEFT JOIN up ON up.n < COALESCE(edge.mark, edge.total) "
        "AND up.n >= COALESCE(edge.mark, edge.total) - ? "
        "LEFT JOIN ops o ON o.pos = up.pos ORDER BY up.n DESC"
    )

    @classmethod
    def rendered(cls, dialect: Dialect) -> ForkQueries:
        plain = cls()
        return cls(*(dialect.render(getattr(plain, f)) for f in cls.__dataclass_fields__))


class SqlForks:
    _d: Dialect

    def _reading(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    @property
    def _fq(self) -> ForkQueries:
        cached: ForkQueries | None = getattr(self, "_fork_queries", None)
        if cached is None:
            cached = ForkQueries.rendered(self._d)
            self._fork_queries = cached
        return cached

    async def read_chain_tips(
        self, chain_id: str, kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        async with self._reading() as conn:
            rows = await conn.fetch(self._fq.tips, (chain_id, kind, until_seq, until_seq))
        return [R.feed_entry(r) for r in rows]

    async def read_chains_tips(
        self, chain_ids: Collection[str], kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        ids = sorted(set(chain_ids))
        out: list[FeedEntry] = []
        async with self._reading() as conn:
            for i in range(0, len(ids), CHAINS_PER_READ):
                chunk = self._d.lst(ids[i : i + CHAINS_PER_READ])
                rows = await conn.fetch(
                    self._fq.tips_of_chains, (chunk, kind, until_seq, until_seq)
                )
                out.extend(R.feed_entry(r) for r in rows)
        if len(ids) > CHAINS_PER_READ:
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
        cap = until_seq  # a branch holds at most every op of the log
        params = (
            cid,
            cap,
            chain_id,
            kind,
            until_seq,
            "" if after is None else after,
            max(limit, 0),
        )
        async with self._reading() as conn:
            rows = await conn.fetch(self._fq.branch, params)
        total, mark = int(rows[0][0]), rows[0][1]
        if total == 0:
            return None
        if after is not None and mark is None:
            raise UnknownCursorError(after)
        start = 0 if mark is None else total - int(mark)  # after ``after``
        entries = tuple(R.feed_entry(r[2:]) for r in rows if r[2] is not None)
        return BranchPage(total, start, entries)
