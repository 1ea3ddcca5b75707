"""The sequencing session of the SQL backends, and the batch writer.

A ``SqlSession`` runs inside a transaction the backend opened (and locked:
BEGIN IMMEDIATE on SQLite, an advisory transaction lock on Postgres). Each
batch read is one query whatever the size of the collection. On Postgres,
where every round trip is spent holding the cross-process lock, a round's
reads (``read_state``) and the whole commit are one statement each; SQLite
runs a statement per table (in-process, a round trip costs next to nothing).
``commit`` ends the transaction through the backend's ``end`` callback; if any
statement fails, the transaction is rolled back at once — nothing of the
batch lands. A session that ends without ``commit`` is rolled back.

Log positions continue from the head (``MAX(pos)`` over live and purged ops)
read inside the locked transaction, so they are gapless, in commit order, and
never given twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection

from stores.base import (
    BeaconRecord,
    ChainRecord,
    CommitBatch,
    IdentityKeyRecord,
    OperationRecord,
    PendingOp,
    Rejection,
    StateQuery,
    StateRows,
    StoreError,
)
from stores.moderation import ModerationBatch
from stores.sql import rows as R
from stores.sql.conn import Conn
from stores.sql.dialect import Dialect
from stores.sql.moderation import write_moderation
from stores.sql.queries import Queries
from stores.state_reads import read_state_stepwise

# Ends the session's transaction: COMMIT (True) or ROLLBACK (False).
TransactionEnd = Callable[[bool], Awaitable[None]]


class SqlSession:
    """A ``SequencingSession`` over one locked transaction."""

    def __init__(self, conn: Conn, q: Queries, dialect: Dialect, end: TransactionEnd) -> None:
        self._conn = conn
        self._q = q
        self._d = dialect
        self._end = end
        self.done = False
        self.new_head: int | None = None  # the head seq a commit of new ops reached
        # CIDs taken from the buffer: the session holds the sequencing lock, so
        # the buffer cannot change under it and a set here marks them for free
        # (a flag written per row cost a row update per parked op)
        self._taken: set[str] = set()
        self._taken_copies: set[tuple[str, str]] = set()

    async def close(self) -> None:
        """Roll back unless committed (the backend calls this on exit)."""
        if not self.done:
            self.done = True
            await self._end(False)

    async def _fetch_in(self, sql: str, values: Collection[str]) -> list[R.Row]:
        if not values:
            return []
        return await self._conn.fetch(sql, (self._d.lst(values),))

    async def get_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        return {r[0]: R.op_record(r) for r in await self._fetch_in(self._q.get_ops, cids)}

    async def get_chains(self, chain_ids: Collection[str]) -> dict[str, ChainRecord]:
        found = await self._fetch_in(self._q.get_chains, chain_ids)
        return {r[0]: R.chain_record(r) for r in found}

    async def get_identity_keys(self, dids: Collection[str]) -> dict[str, list[IdentityKeyRecord]]:
        out: dict[str, list[IdentityKeyRecord]] = {}
        for r in await self._fetch_in(self._q.get_keys, dids):
            out.setdefault(r[0], []).append(R.key_record(r))
        return out

    async def get_beacons(self, dids: Collection[str]) -> dict[str, BeaconRecord]:
        return {r[0]: R.beacon_record(r) for r in await self._fetch_in(self._q.get_beacons, dids)}

    async def get_countersign_pairs(
        self, pairs: Collection[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        wanted = set(pairs)
        found = await self._fetch_in(self._q.get_pairs, {t for t, _ in wanted})
        return {(r[0], r[1]) for r in found} & wanted

    async def get_rejections(self, token_hashes: Collection[str]) -> dict[str, Rejection]:
        found = await self._fetch_in(self._q.get_rejections, token_hashes)
        return {r[0]: R.rejection_record(r) for r in found}

    async def read_state(self, query: StateQuery) -> StateRows:
        if not self._d.arrays:  # embedded: a round trip costs next to nothing
            return await read_state_stepwise(self, query)
        q = query
        params = [
            self._d.lst(values)
            for values in (
                q.cids,
                q.chain_ids,
                q.buffered,
                q.key_dids,
                q.beacon_dids,
                {target for target, _ in q.pairs},
                q.token_hashes,
            )
        ]
        params.append(q.count_pending)
        params.append(self._d.lst(q.ban_dids))
        return R.state_rows(await self._conn.fetch(self._q.read_state_arrays, params), q.pairs)

    async def take_waiting(self, keys: Collection[str]) -> list[PendingOp]:
        taken: list[PendingOp] = []
        sql = self._q.take_waiting_arrays if self._d.arrays else self._q.take_waiting
        for row in await self._fetch_in(sql, keys):
            if row[0] not in self._taken:
                self._taken.add(row[0])
                taken.append(R.pending_op(row))
        return taken

    async def get_buffered(self, cids: Collection[str]) -> dict[str, str]:
        return {r[0]: r[1] for r in await self._fetch_in(self._q.get_buffered, cids)}

    async def get_copy_hashes(self, cids: Collection[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for row in await self._fetch_in(self._q.get_copy_hashes, cids):
            out.setdefault(row[0], set()).add(row[1])
        return out

    async def take_copies(self, cids: Collection[str]) -> list[tuple[str, PendingOp]]:
        taken: list[tuple[str, PendingOp]] = []
        for row in await self._fetch_in(self._q.take_copies, cids):
            token_hash, copy = R.copy_record(row)
            if (copy.cid, token_hash) not in self._taken_copies:
                self._taken_copies.add((copy.cid, token_hash))
                taken.append((token_hash, copy))
        return taken

    async def get_bans(self, dids: Collection[str]) -> dict[str, str]:
        return {r[0]: r[1] for r in await self._fetch_in(self._q.get_bans, dids)}

    async def count_pending(self) -> int:
        sql = self._q.kept_pending_count if self._d.kept_pending_count else self._q.count_pending
        return int((await self._conn.fetch(sql))[0][0])

    async def commit(self, batch: CommitBatch) -> int:
        if self.done:
            raise StoreError("sequencing session already committed")
        self.done = True
        try:
            head = await write_batch(self._conn, self._q, self._d, batch)
            self.new_head = head if batch.operations else None
            await self._end(True)
        except BaseException:
            await self._end(False)
            raise
        return head

    async def apply_moderation(self, batch: ModerationBatch) -> int:
        """Apply a moderation batch in this locked transaction and end it."""
        if self.done:
            raise StoreError("sequencing session already committed")
        self.done = True
        if batch.is_empty():  # nothing to write: end without a transaction to commit
            await self._end(False)
            return 0
        try:
            dropped = await write_moderation(self._conn, self._q, self._d, batch)
            await self._end(True)
        except BaseException:
            await self._end(False)
            raise
        return dropped


async def write_batch(conn: Conn, q: Queries, d: Dialect, batch: CommitBatch) -> int:
    """Write every row of ``batch`` (the caller owns the transaction); returns
    the log's head seq after it."""
    if d.arrays:
        sql = q.commit_arrays_copies if batch.copies or batch.copies_gone else q.commit_arrays
        return int((await conn.fetch(sql, R.commit_columns(batch)))[0][0])
    base = int((await conn.fetch(q.max_pos))[0][0])
    if batch.operations:
        ops = [R.op_row(base + i, op) for i, op in enumerate(batch.operations, start=1)]
        await conn.executemany(q.insert_op, ops)
    if batch.chains:
        await conn.executemany(q.upsert_chain, [R.chain_row(c) for c in batch.chains.values()])
    if batch.identity_keys:
        keys = [(k.did, k.key_id, k.public_key_multibase) for k in batch.identity_keys]
        await conn.executemany(q.insert_key, keys)
    if batch.beacons:
        beacons = [(b.did, b.cid, b.jws_token, b.created_at_ms) for b in batch.beacons.values()]
        await conn.executemany(q.upsert_beacon, beacons)
    if batch.countersignatures:
        sigs = [(c.target_cid, c.witness_did, c.cid, c.jws_token) for c in batch.countersignatures]
        await conn.executemany(q.insert_countersig, sigs)
    if batch.rejections:
        rejs = [(r.token_hash, r.cid, r.reason) for r in batch.rejections]
        await conn.executemany(q.upsert_rejection, rejs)
    # A CID both resolved and waiting ends up waiting (and keeps its since_ms).
    resolved = batch.resolved_cids - batch.waiting.keys()
    # Every op sequenced is resolved. Embedded, an empty buffer (the usual case
    # in order) spares probing it for each CID (a one-page read against ~0.4 us
    # per CID); on a server that read would be one more round trip.
    if resolved and (not d.embedded or (await conn.fetch(q.any_raw))[0][0]):
        await conn.execute(q.delete_raw, (d.lst(resolved),))
    if batch.waiting:
        waiting = [R.waiting_row(p) for p in batch.waiting.values()]
        await conn.executemany(q.upsert_waiting, waiting)
    if batch.copies_gone and (await conn.fetch(q.any_copies))[0][0]:
        await conn.executemany(q.delete_copy, sorted(batch.copies_gone))
    copies = [R.copy_row(h, p) for (_, h), p in batch.kept_copies().items()]
    if copies:
        await conn.executemany(q.insert_copy, copies)
    return base + len(batch.operations)
