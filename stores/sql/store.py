"""The backend-independent half of the durable stores.

``SqlStore`` implements the proof reader, raw buffer, blobs, peer cursors,
relay identity and moderation (``stores.sql.moderation``) once, over two
hooks a backend provides:

- ``_reading()``  a connection for reads (a reader connection / pool conn)
- ``_writing()``  a connection inside a short write transaction, serialized
                  with sequencing sessions where the backend needs it

Sequencing sessions and the lifecycle are the backend's (see
``stores/sqlite.py`` and ``stores/postgres.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager

from stores.base import (
    DEPENDENCY_KINDS,
    BeaconRecord,
    ChainRecord,
    FeedEntry,
    IdentityKeyRecord,
    LogPage,
    OperationKind,
    OperationRecord,
    OpLocation,
    PendingOp,
    PendingSummary,
    RejectionNote,
    RelayIdentityRecord,
    UnknownCursorError,
)
from stores.epoch import new_epoch
from stores.paging import page_after
from stores.sql import rows as R
from stores.sql.conn import Conn
from stores.sql.dialect import Dialect
from stores.sql.forks import SqlForks
from stores.sql.links import SqlLinks
from stores.sql.moderation import SqlModeration
from stores.sql.queries import Queries, pending_summary_sql, render_queries

_CHAIN_KINDS = frozenset({"identity-op", "content-op"})  # ops_chain_log's kinds


def _by_index(
    kinds: Collection[OperationKind], chained_sql: str, standalone_sql: str
) -> list[tuple[list[OperationKind], str]]:
    """``kinds`` split by the partial index that holds them, each with the
    statement (of the two given) that reads that index."""
    chained = sorted(k for k in set(kinds) if k in _CHAIN_KINDS)
    standalone = sorted(k for k in set(kinds) if k not in _CHAIN_KINDS)
    groups = [(chained, chained_sql), (standalone, standalone_sql)]
    return [(group, sql) for group, sql in groups if group]


def _in_log_order(entries: list[FeedEntry], kinds: Collection[OperationKind]) -> list[FeedEntry]:
    """Entries read by two statements (kinds of both indexes), merged by seq."""
    if any(k in _CHAIN_KINDS for k in kinds) and any(k not in _CHAIN_KINDS for k in kinds):
        entries.sort(key=lambda e: e.seq)
    return entries


class SqlStore(SqlModeration, SqlLinks, SqlForks):
    def __init__(self, dialect: Dialect) -> None:
        self._d = dialect
        self._q: Queries = render_queries(dialect)

    def _reading(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _writing(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _writing_one(self) -> AbstractAsyncContextManager[Conn]:
        """A connection for a write of *one* statement, atomic on its own."""
        return self._writing()

    async def _one(self, sql: str, params: Sequence[object]) -> R.Row | None:
        async with self._reading() as conn:
            rows = await conn.fetch(sql, params)
        return rows[0] if rows else None

    # proof reader ----------------------------------------------------------
    async def get_operation(self, cid: str) -> OperationRecord | None:
        row = await self._one(self._q.get_op, (cid,))
        return None if row is None else R.op_record(row)

    async def get_chain(self, chain_id: str) -> ChainRecord | None:
        row = await self._one(self._q.get_chain, (chain_id,))
        return None if row is None else R.chain_record(row)

    async def get_beacon(self, did: str) -> BeaconRecord | None:
        row = await self._one(self._q.get_beacon, (did,))
        return None if row is None else R.beacon_record(row)

    async def get_countersignatures(self, target_cid: str) -> list[str]:
        async with self._reading() as conn:
            return [r[0] for r in await conn.fetch(self._q.get_countersigs, (target_cid,))]

    async def read_log(self, after: str | None, limit: int) -> LogPage:
        async with self._reading() as conn:
            start = 0
            if after is not None:
                found = await conn.fetch(self._q.log_cursor, (after,))
                if not found:
                    raise UnknownCursorError(after)
                start = int(found[0][0])
            rows = await conn.fetch(self._q.log_page, (start, limit + 1))
        entries = [R.log_entry(r) for r in rows[:limit]]
        return page_after(entries, limit, has_more=len(rows) > limit)

    async def read_chain_log(self, chain_id: str, after: str | None, limit: int) -> LogPage:
        async with self._reading() as conn:
            start = 0
            if after is not None:
                found = await conn.fetch(self._q.log_cursor, (after,))
                if not found or found[0][1] != chain_id:
                    raise UnknownCursorError(after)
                start = int(found[0][0])
            rows = await conn.fetch(self._q.chain_log_page, (chain_id, start, limit + 1))
        entries = [R.log_entry(r) for r in rows[:limit]]
        return page_after(entries, limit, has_more=len(rows) > limit)

    async def log_length(self) -> int:
        row = await self._one(self._q.max_pos, ())
        return 0 if row is None else int(row[0])

    # reconciliation ----------------------------------------------------------
    async def read_sync_items(self, after_seq: int, limit: int) -> list[tuple[int, int, str]]:
        async with self._reading() as conn:
            rows = await conn.fetch(self._q.sync_items, (after_seq, limit))
        return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]

    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        if not cids:
            return {}
        async with self._reading() as conn:
            rows = await conn.fetch(self._q.get_ops, (self._d.lst(cids),))
        return {r[0]: R.op_record(r) for r in rows}

    # changes feed ------------------------------------------------------------
    async def read_seq_range(self, after_seq: int, until_seq: int, limit: int) -> list[FeedEntry]:
        async with self._reading() as conn:
            rows = await conn.fetch(self._q.seq_range, (after_seq, until_seq, limit))
        return [R.feed_entry(r) for r in rows]

    async def read_roots(
        self, until_seq: int, after: tuple[int, str] | None, limit: int
    ) -> list[FeedEntry]:
        async with self._reading() as conn:
            if after is None:
                rows = await conn.fetch(self._q.roots_first, (until_seq, limit))
            else:
                ms, cid = after
                rows = await conn.fetch(self._q.roots_after, (until_seq, ms, ms, cid, limit))
        return [R.feed_entry(r) for r in rows]

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        out: list[FeedEntry] = []
        async with self._reading() as conn:
            statements = _by_index(kinds, self._q.chain_entries, self._q.standalone_entries)
            for group, sql in statements:
                rows = await conn.fetch(sql, (chain_id, self._d.lst(group), until_seq))
                out.extend(R.feed_entry(r) for r in rows)
        return _in_log_order(out, kinds)

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        ids = self._d.lst(sorted(set(chain_ids)))
        q = self._q
        statements = _by_index(kinds, q.chains_entries_after, q.standalone_chains_entries_after)
        out: list[FeedEntry] = []
        async with self._reading() as conn:
            for group, sql in statements:
                args = (ids, self._d.lst(group), after_seq, until_seq, limit)
                out.extend(R.feed_entry(r) for r in await conn.fetch(sql, args))
        # each statement's first ``limit`` hold the first ``limit`` of both
        return _in_log_order(out, kinds)[:limit]

    async def get_feed_epoch(self) -> str:
        row = await self._one(self._q.get_epoch, ())
        if row is not None:
            return str(row[0])
        async with self._writing_one() as conn:
            await conn.execute(self._q.init_epoch, (new_epoch(),))
        row = await self._one(self._q.get_epoch, ())  # another process may have won
        assert row is not None
        return str(row[0])

    async def watch_commits(
        self, on_head: Callable[[int], None], on_listening: Callable[[bool], None]
    ) -> Callable[[], Awaitable[None]] | None:
        return None  # a backend that can push commits overrides this

    def watch_epoch(self, on_doubt: Callable[[], None]) -> None:
        return None  # a backend whose epoch can change under a running relay overrides this

    async def reset_feed_epoch(self) -> str:
        epoch = new_epoch()
        async with self._writing_one() as conn:
            await conn.execute(self._q.set_epoch, (epoch,))
        return epoch

    async def get_identity_keys(self, dids: Collection[str]) -> dict[str, list[IdentityKeyRecord]]:
        return R.keys_by_did(await self._fetch_in(self._q.get_keys, dids))

    async def sequenced_and_keys(
        self, cids: Collection[str], dids: Collection[str]
    ) -> tuple[set[str], dict[str, list[IdentityKeyRecord]]]:
        if self._d.arrays:  # one round trip
            rows = await self._fetch_two(self._q.sequenced_and_keys, cids, dids)
            sequenced = {str(r[1]) for r in rows if r[0] == "o"}
            return sequenced, R.keys_by_did(r[1:4] for r in rows if r[0] == "k")
        # embedded: two reader connections, side by side
        found, keys = await asyncio.gather(
            self._fetch_in(self._q.known_cids, cids), self.get_identity_keys(dids)
        )
        return {str(r[0]) for r in found}, keys

    async def _fetch_two(
        self, sql: str, first: Collection[str], second: Collection[str]
    ) -> list[R.Row]:
        async with self._reading() as conn:
            return await conn.fetch(sql, (self._d.lst(first), self._d.lst(second)))

    async def _fetch_in(self, sql: str, values: Collection[str]) -> list[R.Row]:
        if not values:
            return []
        async with self._reading() as conn:
            return await conn.fetch(sql, (self._d.lst(values),))

    # raw buffer ------------------------------------------------------------
    async def put_raw_ops(
        self, ops: Sequence[tuple[str, str]], received_at_ms: int = 0
    ) -> set[str]:
        if not ops:
            return set()
        if self._d.arrays:
            cids, tokens = zip(*ops, strict=True)
            params = (list(cids), list(tokens), received_at_ms)
            async with self._writing_one() as conn:
                rows = await conn.fetch(self._q.put_raw_arrays, params)
            return {str(r[0]) for r in rows}
        async with self._writing() as conn:
            await conn.executemany(self._q.put_raw, [(c, t, received_at_ms, c) for c, t in ops])
            rows = await conn.fetch(self._q.known_cids, (self._d.lst({c for c, _ in ops}),))
        return {str(r[0]) for r in rows}

    async def get_unsequenced(self, limit: int, after_cid: str | None = None) -> list[PendingOp]:
        async with self._reading() as conn:
            rows = await conn.fetch(self._q.unsequenced, (after_cid or "", limit))
        return [R.pending_op(r) for r in rows]

    async def get_waiting_for_policy(
        self, limit: int, after_cid: str | None = None
    ) -> list[PendingOp]:
        async with self._reading() as conn:
            rows = await conn.fetch(self._q.waiting_for_policy, (after_cid or "", limit))
        return [R.pending_op(r) for r in rows]

    async def get_copies(self, cids: Collection[str]) -> list[tuple[str, PendingOp]]:
        if not cids:
            return []
        async with self._reading() as conn:
            rows = await conn.fetch(self._q.take_copies, (self._d.lst(cids),))
        return [R.copy_record(r) for r in rows]

    async def count_unsequenced(self) -> int:
        row = await self._one(self._q.count_unsequenced, ())
        return 0 if row is None else int(row[0])

    # op status -------------------------------------------------------------
    async def locate_operations(self, cids: Collection[str]) -> dict[str, OpLocation]:
        return {r[0]: R.location(r) for r in await self._fetch_in(self._q.locate_ops, cids)}

    async def find_buffered(self, cids: Collection[str]) -> dict[str, PendingOp]:
        return {r[0]: R.pending_op(r) for r in await self._fetch_in(self._q.find_buffered, cids)}

    async def get_rejection_notes(self, cids: Collection[str]) -> dict[str, RejectionNote]:
        return {r[0]: R.note_record(r) for r in await self._fetch_in(self._q.get_notes, cids)}

    async def record_rejection_notes(self, notes: Sequence[RejectionNote], keep: int) -> None:
        if not notes:
            return
        latest = {note.cid: R.note_row(note) for note in notes}  # one row per CID
        async with self._writing() as conn:
            if self._d.arrays:
                columns = [list(column) for column in zip(*latest.values(), strict=True)]
                await conn.execute(self._q.put_notes_arrays, columns)
            else:
                await conn.executemany(self._q.put_note, list(latest.values()))
            await conn.execute(self._q.prune_notes, (max(keep, 0),))

    async def pending_summary(self, cutoffs_ms: Sequence[int]) -> PendingSummary:
        sql = pending_summary_sql(self._d, len(cutoffs_ms))
        async with self._reading() as conn:
            rows = await conn.fetch(sql, list(cutoffs_ms))
            oldest = await conn.fetch(self._q.oldest_waiting, ())
            copies = int((await conn.fetch(self._q.count_copies, ()))[0][0])
        waiting = {kind: 0 for kind in DEPENDENCY_KINDS}
        older = {kind: [0] * len(cutoffs_ms) for kind in DEPENDENCY_KINDS}
        unverified = 0
        for row in rows:
            if row[0] == "":
                unverified = int(row[1])
                continue
            waiting[row[0]] = int(row[1])
            older[row[0]] = [int(n or 0) for n in row[2:]]
        return PendingSummary(
            waiting, older, unverified, R.pending_op(oldest[0]) if oldest else None, copies
        )

    # blobs -----------------------------------------------------------------
    async def get_blob(self, creator_did: str, document_cid: str) -> bytes | None:
        row = await self._one(self._q.get_blob, (creator_did, document_cid))
        return None if row is None else bytes(row[0])

    async def put_blob(self, creator_did: str, document_cid: str, data: bytes) -> None:
        async with self._writing() as conn:
            await conn.execute(self._q.put_blob, (creator_did, document_cid, bytes(data)))

    # peer cursors ----------------------------------------------------------
    async def get_peer_cursor(self, peer_url: str) -> str | None:
        row = await self._one(self._q.get_cursor, (peer_url,))
        return None if row is None else str(row[0])

    async def set_peer_cursor(self, peer_url: str, cursor: str) -> None:
        async with self._writing() as conn:
            await conn.execute(self._q.set_cursor, (peer_url, cursor))

    async def list_peer_cursors(self) -> dict[str, str]:
        async with self._reading() as conn:
            return {str(r[0]): str(r[1]) for r in await conn.fetch(self._q.list_cursors, ())}

    # relay identity --------------------------------------------------------
    async def get_relay_identity(self) -> RelayIdentityRecord | None:
        row = await self._one(self._q.get_identity, ())
        return None if row is None else R.identity_record(row)

    async def put_relay_identity(self, identity: RelayIdentityRecord) -> None:
        i = identity
        params = (i.did, i.key_id, bytes(i.seed), i.genesis_token, i.profile_token)
        async with self._writing() as conn:
            await conn.execute(self._q.put_identity, params)
