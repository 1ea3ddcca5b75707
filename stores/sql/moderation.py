"""Moderation on the SQL stores (``stores.moderation``): bans, purge
records, the reads a purge plan needs, and the atomic moderation write.

``SqlModeration`` is mixed into ``SqlStore``; ``write_moderation`` runs
inside a sequencing session's locked transaction (``SqlSession``), so a
purge never interleaves with a batch being sequenced. Statements are written
once and rendered per dialect, like ``stores.sql.queries``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, cast

from stores.base import OperationKind, OperationRecord
from stores.epoch import new_epoch
from stores.moderation import BanChanges, BanRecord, ModerationBatch, PurgedOperation
from stores.sql import rows as R
from stores.sql.conn import Conn, PagedConn
from stores.sql.dialect import Dialect
from stores.sql.queries import OP_COLS, Queries

if TYPE_CHECKING:
    from stores.sql.session import SqlSession

PURGED_COLS = "pos, cid, kind, chain_id, author_did, purged_did, purged_at_ms"
PLAN_PAGE = 2000  # op rows read from the driver, and decoded, between two yields to the loop


@dataclass(frozen=True, slots=True)
class ModerationQueries:
    put_ban: str = (
        "INSERT INTO bans (did, reason, banned_at_ms, banned_by) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (did) DO UPDATE SET reason = excluded.reason, "
        "banned_at_ms = excluded.banned_at_ms, banned_by = excluded.banned_by"
    )
    delete_ban: str = "DELETE FROM bans WHERE did = ? RETURNING did"
    list_bans: str = "SELECT did, reason, banned_at_ms, banned_by FROM bans ORDER BY did"
    page_bans: str = (
        "SELECT did, reason, banned_at_ms, banned_by FROM bans WHERE did > ? ORDER BY did LIMIT ?"
    )
    # the ban list's refresh: the mark first, and only if it moved, what changed
    ban_change_count: str = "SELECT n FROM ban_change_count WHERE id = 1"
    ban_changes: str = (
        "SELECT c.n, c.did, b.reason, b.banned_at_ms, b.banned_by FROM ban_changes c "
        "LEFT JOIN bans b ON b.did = c.did WHERE c.n > ?"
    )
    count_purged: str = (
        "SELECT purged_did, kind, COUNT(*) FROM purged_ops WHERE purged_did {IN} "
        "GROUP BY purged_did, kind"
    )
    list_purged: str = f"SELECT {PURGED_COLS} FROM purged_ops ORDER BY pos, cid, id"
    list_purged_of: str = (
        f"SELECT {PURGED_COLS} FROM purged_ops WHERE purged_did = ? ORDER BY pos, cid, id"
    )
    signed_by: str = f"SELECT {OP_COLS} FROM ops WHERE author_did = ? ORDER BY pos"
    in_chains: str = f"SELECT {OP_COLS} FROM ops WHERE chain_id {{IN}} ORDER BY pos"
    # the write, statement by statement, inside the locked transaction
    # from the ops still stored: a step's op another step already removed is not recorded twice
    record_purged: str = (
        "INSERT INTO purged_ops (pos, cid, kind, chain_id, author_did, purged_did, "
        "purged_at_ms) SELECT pos, cid, kind, chain_id, author_did, CAST(? AS TEXT), "
        "CAST(? AS {BIGINT}) FROM ops WHERE cid {IN}"
    )
    purge_under_way: str = (
        "INSERT INTO purges_under_way (did, at_ms) VALUES (?, ?) ON CONFLICT (did) DO NOTHING"
    )
    purge_done: str = "DELETE FROM purges_under_way WHERE did = ?"
    purges_under_way: str = "SELECT did, at_ms FROM purges_under_way ORDER BY did"
    delete_ops: str = "DELETE FROM ops WHERE cid {IN}"
    delete_countersigs: str = "DELETE FROM countersigs WHERE cid {IN}"
    delete_beacons_of_ops: str = "DELETE FROM beacons WHERE cid {IN}"
    delete_chains: str = "DELETE FROM chains WHERE chain_id {IN}"
    delete_keys: str = "DELETE FROM identity_keys WHERE did {IN}"
    delete_key: str = "DELETE FROM identity_keys WHERE did = ? AND key_id = ? AND multibase = ?"
    delete_beacons: str = "DELETE FROM beacons WHERE did {IN}"
    delete_blobs: str = "DELETE FROM blobs WHERE creator_did {IN}"
    # only ops still unsequenced leave the buffer (a sequenced one is not buffered)
    drop_raw: str = "DELETE FROM raw_ops WHERE cid {IN} RETURNING cid"
    # a copy takes the place of the op buffered under its CID (which keeps
    # waiting for what it waited for)
    replace_raw: str = "UPDATE raw_ops SET token = ? WHERE cid = ? RETURNING cid"
    reset_epoch: str = (
        "INSERT INTO feed_meta (id, epoch) VALUES (1, ?) "
        "ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch"
    )


def render_moderation(dialect: Dialect) -> ModerationQueries:
    base = ModerationQueries()
    rendered = {f.name: dialect.render(getattr(base, f.name)) for f in fields(ModerationQueries)}
    return ModerationQueries(**rendered)


def purged_record(row: R.Row) -> PurgedOperation:
    kind = cast(OperationKind, row[2])
    return PurgedOperation(int(row[0]), row[1], kind, row[3], row[4], row[5], int(row[6]))


async def write_moderation(conn: Conn, q: Queries, d: Dialect, batch: ModerationBatch) -> int:
    """Every change of ``batch`` (the caller owns the locked transaction);
    returns how many raw ops left the buffer."""
    mq = render_moderation(d)  # rare: rendering per call costs nothing that matters
    cids = [op.cid for op in batch.operations]
    if batch.purge_under_way:
        await conn.execute(mq.purge_under_way, (batch.purged_did, batch.at_ms))
    if batch.blob_creators:
        await conn.execute(mq.delete_blobs, (d.lst(batch.blob_creators),))
    if cids:
        await conn.execute(mq.record_purged, (batch.purged_did, batch.at_ms, d.lst(cids)))
        for sql in (mq.delete_countersigs, mq.delete_beacons_of_ops, mq.delete_ops):
            await conn.execute(sql, (d.lst(cids),))
        if not batch.keep_epoch:
            await conn.execute(mq.reset_epoch, (new_epoch(),))
    if batch.chains_removed:
        await conn.execute(mq.delete_chains, (d.lst(batch.chains_removed),))
    if batch.chains_rewound:
        await conn.executemany(q.upsert_chain, [R.chain_row(c) for c in batch.chains_rewound])
    if batch.keys_removed:
        keys = sorted((k.did, k.key_id, k.public_key_multibase) for k in batch.keys_removed)
        await conn.executemany(mq.delete_key, keys)
    if batch.dids_removed:
        for sql in (mq.delete_keys, mq.delete_beacons, mq.delete_blobs):
            await conn.execute(sql, (d.lst(batch.dids_removed),))
    dropped = 0
    if batch.raw_cids:
        # fetch, not execute: SQLite defers plain writes to COMMIT, and the count matters
        dropped += len(await conn.fetch(mq.drop_raw, (d.lst(batch.raw_cids),)))
    gone = set(batch.raw_copies_gone)
    for cid, (token_hash, token) in batch.raw_replaced.items():
        dropped += len(await conn.fetch(mq.replace_raw, (token, cid)))
        gone.add((cid, token_hash))
    if gone:
        await conn.executemany(q.delete_copy, sorted(gone))
    if batch.purge_done:
        await conn.execute(mq.purge_done, (batch.purged_did,))
    return dropped


async def _op_records(
    reading: AbstractAsyncContextManager[PagedConn], sql: str, params: Sequence[Any]
) -> list[OperationRecord]:
    """Rows read and decoded a page at a time, the loop let go in between: a
    purge plan reads every op of a DID (150 000: over a second of decoding,
    and on Postgres all of them decoded by the driver in one go)."""
    records: list[OperationRecord] = []
    async with reading as conn, aclosing(conn.fetch_pages(sql, params, PLAN_PAGE)) as pages:
        async for rows in pages:
            records += [R.op_record(r) for r in rows]
            await asyncio.sleep(0)
    return records


class SqlModeration:
    """The ``ModerationStore`` half of ``SqlStore``."""

    _d: Dialect

    def _reading(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _writing(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _paged_reading(self) -> AbstractAsyncContextManager[PagedConn]:
        raise NotImplementedError

    def sequencing(self) -> AbstractAsyncContextManager[SqlSession]:
        raise NotImplementedError

    @property
    def _mq(self) -> ModerationQueries:
        cached: ModerationQueries | None = getattr(self, "_mq_cache", None)
        if cached is None:
            cached = render_moderation(self._d)
            self._mq_cache = cached
        return cached

    async def put_ban(self, ban: BanRecord) -> None:
        params = (ban.did, ban.reason, ban.banned_at_ms, ban.banned_by)
        async with self._writing() as conn:
            await conn.execute(self._mq.put_ban, params)

    async def delete_ban(self, did: str) -> bool:
        async with self._writing() as conn:
            return bool(await conn.fetch(self._mq.delete_ban, (did,)))

    async def list_bans(
        self, limit: int | None = None, after: str | None = None
    ) -> list[BanRecord]:
        async with self._reading() as conn:
            if limit is None and after is None:
                rows = await conn.fetch(self._mq.list_bans, ())
            else:  # "" sorts before every DID; -1 is no limit on SQLite, so no None here
                bound = limit if limit is not None else 2**62
                rows = await conn.fetch(self._mq.page_bans, (after or "", bound))
        return [BanRecord(r[0], r[1], int(r[2]), r[3]) for r in rows]

    async def ban_changes(self, after: int) -> BanChanges:
        async with self._reading() as conn:
            mark = int((await conn.fetch(self._mq.ban_change_count, ()))[0][0])
            if mark == after:
                return BanChanges(mark)
            since = after if mark > after else 0  # went back: every ban, anew
            # one statement: each changed DID and its ban as of the same snapshot
            rows = await conn.fetch(self._mq.ban_changes, (since,))
        changes = BanChanges(max([mark, *(int(r[0]) for r in rows)]), whole=since == 0)
        for _n, did, reason, at_ms, by in rows:
            if reason is None:
                changes.lifted.append(did)
            else:
                changes.banned.append(BanRecord(did, reason, int(at_ms), by))
        return changes

    async def count_purged(self, dids: Collection[str]) -> dict[str, dict[str, int]]:
        if not dids:
            return {}
        async with self._reading() as conn:
            rows = await conn.fetch(self._mq.count_purged, (self._d.lst(dids),))
        counts: dict[str, dict[str, int]] = {}
        for did, kind, n in rows:
            counts.setdefault(did, {})[kind] = int(n)
        return counts

    async def list_purged(self, did: str | None = None) -> list[PurgedOperation]:
        async with self._reading() as conn:
            if did is None:
                rows = await conn.fetch(self._mq.list_purged, ())
            else:
                rows = await conn.fetch(self._mq.list_purged_of, (did,))
        return [purged_record(r) for r in rows]

    async def purges_under_way(self) -> dict[str, int]:
        async with self._reading() as conn:
            rows = await conn.fetch(self._mq.purges_under_way, ())
        return {r[0]: int(r[1]) for r in rows}

    async def operations_signed_by(self, did: str) -> list[OperationRecord]:
        return await _op_records(self._paged_reading(), self._mq.signed_by, (did,))

    async def operations_in_chains(self, chain_ids: Collection[str]) -> list[OperationRecord]:
        if not chain_ids:
            return []
        return await _op_records(
            self._paged_reading(), self._mq.in_chains, (self._d.lst(chain_ids),)
        )

    @asynccontextmanager
    async def moderating(self) -> AsyncIterator[SqlSession]:
        async with self.sequencing() as session:
            yield session
