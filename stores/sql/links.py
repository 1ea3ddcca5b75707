"""The replication ledger on the SQL stores (``stores.base.LinkLedgerStore``).

``SqlLinks`` is mixed into ``SqlStore``. A link is one row of ``peer_links``
(schema v5), upserted whole by one statement: the ledger writes a link's
full record each time, so there is no read-modify-write to serialize.
Pending tokens and diagnostics are JSON text (``stores.links``). A process's
share of an out-link is one row of ``out_link_marks`` (v12), upserted whole
the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, cast

from stores.base import LinkDirection, LinkRecord, LinkState, OutMark
from stores.links import bounded, dump_diagnostics, load_diagnostics, pending_text, pending_tuple
from stores.sql.conn import Conn
from stores.sql.dialect import Dialect

LINK_COLS = (
    "peer_url, scope_id, direction, state, received_token, applied_token, pending_tokens, "
    "failures, last_success_ms, last_failure_ms, last_error, diagnostics, remote_head, "
    "caught_up_ms, updated_ms"
)
_KEY = "peer_url = ? AND scope_id = ? AND direction = ?"
_UPDATED = [c.strip() for c in LINK_COLS.split(",")][3:]
MARK_COLS = (
    "writer, peer_url, scope_id, state, received_token, applied_token, pending_tokens, "
    "failures, last_success_ms, last_failure_ms, last_error, caught_up_ms, updated_ms"
)
_MARK_UPDATED = [c.strip() for c in MARK_COLS.split(",")][3:]
_MARK_KEY = "writer = ? AND peer_url = ? AND scope_id = ?"


@dataclass(frozen=True, slots=True)
class LinkQueries:
    get: str = f"SELECT {LINK_COLS} FROM peer_links WHERE {_KEY}"
    put: str = (
        f"INSERT INTO peer_links ({LINK_COLS}) VALUES ({', '.join(['?'] * 15)}) "
        "ON CONFLICT (peer_url, scope_id, direction) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in _UPDATED if c != "state")
        # the last parameter: an operator's write (pause, resume) sets the state
        + ", state = CASE WHEN ? THEN excluded.state WHEN peer_links.state = 'paused' "
        "OR excluded.state = 'paused' THEN peer_links.state ELSE excluded.state END"
    )
    list_all: str = f"SELECT {LINK_COLS} FROM peer_links ORDER BY peer_url, scope_id, direction"
    delete: str = f"DELETE FROM peer_links WHERE {_KEY} RETURNING peer_url"
    put_mark: str = (
        f"INSERT INTO out_link_marks ({MARK_COLS}) VALUES ({', '.join(['?'] * 13)}) "
        "ON CONFLICT (peer_url, scope_id, writer) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in _MARK_UPDATED)
    )
    list_marks: str = f"SELECT {MARK_COLS} FROM out_link_marks ORDER BY peer_url, scope_id, writer"
    delete_mark: str = f"DELETE FROM out_link_marks WHERE {_MARK_KEY} RETURNING writer"
    delete_mark_if: str = (
        f"DELETE FROM out_link_marks WHERE {_MARK_KEY} AND updated_ms = ? RETURNING writer"
    )

    @classmethod
    def rendered(cls, dialect: Dialect) -> LinkQueries:
        plain = cls()
        return cls(*(dialect.render(getattr(plain, f)) for f in cls.__dataclass_fields__))


def _progress(r: Sequence[Any]) -> dict[str, Any]:
    """Columns 3 to 10, in the same places in a link row and a share row."""
    return {
        "state": cast(LinkState, r[3]),
        "received_token": r[4],
        "applied_token": r[5],
        "pending_tokens": pending_tuple(r[6]),
        "failures": int(r[7]),
        "last_success_ms": None if r[8] is None else int(r[8]),
        "last_failure_ms": None if r[9] is None else int(r[9]),
        "last_error": r[10],
    }


def _row(r: Sequence[Any]) -> LinkRecord:
    return LinkRecord(
        peer_url=str(r[0]),
        scope_id=str(r[1]),
        direction=cast(LinkDirection, r[2]),
        **_progress(r),
        diagnostics=load_diagnostics(r[11]),
        remote_head=None if r[12] is None else int(r[12]),
        caught_up_ms=None if r[13] is None else int(r[13]),
        updated_ms=int(r[14]),
    )


def _params(record: LinkRecord) -> tuple[Any, ...]:
    r = bounded(record)
    return (
        r.peer_url, r.scope_id, r.direction, r.state, r.received_token, r.applied_token,
        pending_text(r.pending_tokens), r.failures, r.last_success_ms, r.last_failure_ms,
        r.last_error, dump_diagnostics(r.diagnostics), r.remote_head, r.caught_up_ms,
        r.updated_ms,
    )  # fmt: skip


def _mark(r: Sequence[Any]) -> OutMark:
    record = LinkRecord(
        peer_url=str(r[1]),
        scope_id=str(r[2]),
        direction="out",
        **_progress(r),
        caught_up_ms=None if r[11] is None else int(r[11]),
        updated_ms=int(r[12]),
    )
    return OutMark(str(r[0]), record)


def _mark_params(mark: OutMark) -> tuple[Any, ...]:
    r = bounded(mark.record)
    return (
        mark.writer, r.peer_url, r.scope_id, r.state, r.received_token, r.applied_token,
        pending_text(r.pending_tokens), r.failures, r.last_success_ms, r.last_failure_ms,
        r.last_error, r.caught_up_ms, r.updated_ms,
    )  # fmt: skip


class SqlLinks:
    _d: Dialect

    def _reading(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _writing_one(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    @property
    def _lq(self) -> LinkQueries:
        cached: LinkQueries | None = getattr(self, "_link_queries", None)
        if cached is None:
            cached = LinkQueries.rendered(self._d)
            self._link_queries = cached
        return cached

    async def get_link(
        self, peer_url: str, scope_id: str, direction: LinkDirection
    ) -> LinkRecord | None:
        async with self._reading() as conn:
            rows = await conn.fetch(self._lq.get, (peer_url, scope_id, direction))
        return _row(rows[0]) if rows else None

    async def put_link(self, record: LinkRecord, operator: bool = False) -> None:
        async with self._writing_one() as conn:
            await conn.execute(self._lq.put, (*_params(record), operator))

    async def list_links(self) -> list[LinkRecord]:
        async with self._reading() as conn:
            return [_row(r) for r in await conn.fetch(self._lq.list_all, ())]

    async def delete_link(self, peer_url: str, scope_id: str, direction: LinkDirection) -> bool:
        async with self._writing_one() as conn:
            rows = await conn.fetch(self._lq.delete, (peer_url, scope_id, direction))
        return bool(rows)

    async def put_out_mark(self, mark: OutMark) -> None:
        async with self._writing_one() as conn:
            await conn.execute(self._lq.put_mark, _mark_params(mark))

    async def list_out_marks(self) -> list[OutMark]:
        async with self._reading() as conn:
            return [_mark(r) for r in await conn.fetch(self._lq.list_marks, ())]

    async def delete_out_mark(
        self, writer: str, peer_url: str, scope_id: str, updated_ms: int | None = None
    ) -> bool:
        key = (writer, peer_url, scope_id)
        async with self._writing_one() as conn:
            if updated_ms is None:
                rows = await conn.fetch(self._lq.delete_mark, key)
            else:
                rows = await conn.fetch(self._lq.delete_mark_if, (*key, updated_ms))
        return bool(rows)
