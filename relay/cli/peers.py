"""``dfos-relay peers [--store URL] [--json]``: the replication ledger as a
store holds it (one row per link: peer, scope, direction), with each
link's state, applied token, lag and last error.

A table by default; ``--json`` prints one object ``{"links": [...]}`` whose
items have the shape of ``GET /peers`` links (plus ``peer``). It reads the
store only, so it works against the store of a running relay or a stopped
one (what the relay last wrote: token progress is written at most a
second late, state changes at once). An out-link is shown merged over
every process's share of it (``relay.peering.link_merge``), gone ones
included until a running process clears them. Lag of an out-link is
measured against the store's log head.
"""

from __future__ import annotations

import json
from typing import Any

from relay.http.wire import link
from relay.peering.ledger import wall_ms
from relay.peering.link_merge import merge_out
from relay.peering.link_view import LinkView, link_view
from stores.base import LinkRecord

COLUMNS = ("PEER", "SCOPE", "DIR", "STATE", "APPLIED", "PENDING", "LAG OPS", "LAG S",
           "FAILURES", "LAST ERROR")  # fmt: skip


class PeersError(Exception):
    """One line for the operator."""


async def read_links(store_url: str, store_source: str) -> list[LinkView]:
    from relay.asgi import store_from_url
    from relay.cli.verify import holds_no_store
    from stores.base import StoreError

    store = store_from_url(store_url, store_source)
    absent = await holds_no_store(store)
    if absent is not None:
        raise PeersError(f"store {store_url}: {absent}")
    try:
        await store.open()
        try:
            records = await store.list_links()
            marks = await store.list_out_marks()
            head = await store.log_length()
        finally:
            await store.close()
    except StoreError as exc:
        raise PeersError(f"store {store_url}: {exc}") from None
    now = wall_ms()
    shares: dict[tuple[str, str], list[LinkRecord]] = {}
    for mark in marks:
        shares.setdefault((mark.record.peer_url, mark.record.scope_id), []).append(mark.record)
    merged = [
        merge_out(r, shares.get((r.peer_url, r.scope_id), [])) if r.direction == "out" else r
        for r in records
    ]
    return [link_view(record, now, head) for record in merged]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def table(views: list[LinkView]) -> str:
    rows: list[tuple[str, ...]] = [COLUMNS]
    for view in views:
        r = view.record
        rows.append(tuple(_cell(v) for v in (
            r.peer_url, r.scope_id, r.direction, r.state, r.applied_token,
            len(r.pending_tokens), view.lag_ops, view.lag_seconds, r.failures, r.last_error,
        )))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]  # fmt: skip
    return "\n".join(lines)


async def peers_command(store_url: str, as_json: bool, *, store_source: str) -> int:
    views = await read_links(store_url, store_source)
    if as_json:
        print(json.dumps({"links": [link(v) for v in views]}))
    elif not views:
        print(f"no replication links recorded in {store_url}")
    else:
        print(table(views))
    return 0
