"""The audit snapshot of the SQL stores (``stores.audit``).

``SqlAuditSnapshot`` reads every table by keyset pages over one connection
that the backend holds inside a read-only snapshot transaction (see
``SqliteStore.audit_snapshot`` and ``PostgresStore.audit_snapshot``). No
statement relies on a unique constraint: ops page by (pos, cid), so two
rows sharing a position or a CID both come back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from stores.audit import AUDIT_PAGE
from stores.base import (
    BeaconRecord,
    ChainRecord,
    CountersignatureRecord,
    IdentityKeyRecord,
    OperationRecord,
    PendingOp,
)
from stores.moderation import PurgedOperation
from stores.sql import rows as R
from stores.sql.conn import Conn
from stores.sql.dialect import Dialect
from stores.sql.moderation import PURGED_COLS, purged_record
from stores.sql.queries import CHAIN_COLS, OP_COLS

_T = TypeVar("_T")

_OPS_FIRST = f"SELECT {OP_COLS} FROM ops ORDER BY pos, cid LIMIT ?"
_OPS_AFTER = (
    f"SELECT {OP_COLS} FROM ops WHERE pos > ? OR (pos = ? AND cid > ?) ORDER BY pos, cid LIMIT ?"
)
_CHAINS = f"SELECT {CHAIN_COLS} FROM chains WHERE chain_id > ? ORDER BY chain_id LIMIT ?"
_KEYS = "SELECT did, key_id, multibase, id FROM identity_keys WHERE id > ? ORDER BY id LIMIT ?"
_BEACONS = "SELECT did, cid, token, created_at_ms FROM beacons WHERE did > ? ORDER BY did LIMIT ?"
_SIGS = (
    "SELECT target_cid, witness_did, cid, token, id FROM countersigs WHERE id > ? "
    "ORDER BY id LIMIT ?"
)
_BLOBS = (
    "SELECT creator_did, document_cid FROM blobs WHERE creator_did > ? "
    "OR (creator_did = ? AND document_cid > ?) ORDER BY creator_did, document_cid LIMIT ?"
)
_RAW = (
    "SELECT cid, token, COALESCE(waits_for, ''), since_ms, received_at_ms FROM raw_ops "
    "WHERE cid > ? ORDER BY cid LIMIT ?"
)
_COPIES = (
    "SELECT cid, token_hash, token, since_ms FROM raw_copies WHERE cid > ? "
    "OR (cid = ? AND token_hash > ?) ORDER BY cid, token_hash LIMIT ?"
)
_PURGED = f"SELECT {PURGED_COLS} FROM purged_ops ORDER BY pos, cid, id"
_COUNT = "SELECT COUNT(*) FROM ops"


class SqlAuditSnapshot:
    """Implements ``stores.audit.AuditSnapshot`` over a snapshot connection."""

    def __init__(self, conn: Conn, dialect: Dialect, page: int = AUDIT_PAGE) -> None:
        self._conn = conn
        self._d = dialect
        self._page = page

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[R.Row]:
        return await self._conn.fetch(self._d.render(sql), params)

    async def _paged(
        self,
        sql: str,
        start: Sequence[Any],
        next_key: Callable[[R.Row], Sequence[Any]],
        build: Callable[[R.Row], _T],
    ) -> AsyncIterator[_T]:
        key = start
        while True:
            rows = await self._rows(sql, (*key, self._page))
            for row in rows:
                yield build(row)
            if len(rows) < self._page:
                return
            key = next_key(rows[-1])

    async def count_operations(self) -> int:
        return int((await self._rows(_COUNT, ()))[0][0])

    async def operations(self) -> AsyncIterator[OperationRecord]:
        rows = await self._rows(_OPS_FIRST, (self._page,))
        while rows:
            for row in rows:
                yield R.op_record(row)
            if len(rows) < self._page:
                return
            last = R.op_record(rows[-1])
            rows = await self._rows(_OPS_AFTER, (last.seq, last.seq, last.cid, self._page))

    def chains(self) -> AsyncIterator[ChainRecord]:
        return self._paged(_CHAINS, ("",), lambda r: (r[0],), R.chain_record)

    def identity_keys(self) -> AsyncIterator[IdentityKeyRecord]:
        return self._paged(_KEYS, (0,), lambda r: (int(r[3]),), R.key_record)

    def beacons(self) -> AsyncIterator[BeaconRecord]:
        return self._paged(_BEACONS, ("",), lambda r: (r[0],), R.beacon_record)

    def countersignatures(self) -> AsyncIterator[CountersignatureRecord]:
        return self._paged(
            _SIGS, (0,), lambda r: (int(r[4]),), lambda r: CountersignatureRecord(*r[:4])
        )

    def blob_keys(self) -> AsyncIterator[tuple[str, str]]:
        return self._paged(
            _BLOBS, ("", "", ""), lambda r: (r[0], r[0], r[1]), lambda r: (r[0], r[1])
        )

    def raw_ops(self) -> AsyncIterator[PendingOp]:
        return self._paged(_RAW, ("",), lambda r: (r[0],), R.pending_op)

    def raw_copies(self) -> AsyncIterator[tuple[str, PendingOp]]:
        return self._paged(_COPIES, ("", "", ""), lambda r: (r[0], r[0], r[1]), R.copy_record)

    async def purged(self) -> list[PurgedOperation]:
        return [purged_record(r) for r in await self._rows(_PURGED, ())]
