"""Paging through ``GET /log?scope=`` costs each page reads in proportion to
the page, not to the part of the scope before it: the relay goes on from
the closure where the previous page left it (``relay.scope.checkpoints``)."""

from __future__ import annotations

from typing import Any

import httpx

from relay import create_relay
from relay.testing.workload import WorkloadBuilder
from tests.scope.counting_store import CountingStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

LIMIT = 20


def busy_chain(ops: int) -> tuple[list[str], str]:
    """A content chain of about ``ops`` ops whose closure keeps growing (a
    new co-author every few ops), with countersignatures and ops beside it."""
    b = WorkloadBuilder(seed=3, start_ms=PAST_MS, step_ms=10)
    creator, outsider = b.identity(), b.identity()
    chain, other = b.content_create(creator), b.content_create(outsider)
    authors = []
    for i in range(ops):
        if i % 10 == 0:
            author = b.identity()
            authors.append((author, b.write_credential(creator, author, chain.content_id)))
        author, grant = authors[i % len(authors)]
        if i % 3 == 0:
            b.content_update(chain, author, authorization=grant)
        elif i % 5 == 0:
            b.countersign(author, chain.head_cid)
        elif i % 7 == 0:
            b.content_update(other)
        else:
            b.content_update(chain)
    return b.tokens, chain.content_id


async def rows_per_page(store: CountingStore, client: httpx.AsyncClient, scope: str) -> list[int]:
    rows: list[int] = []
    seen: list[str] = []
    after = None
    while True:
        params: dict[str, Any] = {"scope": scope, "limit": LIMIT}
        if after is not None:
            params["after"] = after
        store.rows = 0
        page = (await client.get("/log", params=params)).json()
        rows.append(store.rows)
        seen.extend(e["cid"] for e in page["entries"])
        after = page["cursor"]
        if after is None:
            assert len(seen) == len(set(seen))
            return rows


async def test_every_page_reads_about_as_many_rows_as_it_serves() -> None:
    tokens, content_id = busy_chain(1200)
    store = CountingStore()
    relay = create_relay(store)
    async with relay.running():
        for i in range(0, len(tokens), 50):  # as they come: the log interleaves them
            await relay.ingest(tokens[i : i + 50])
        async with asgi_client(relay.app) as client:
            rows = await rows_per_page(store, client, content_id)
    assert len(rows) > 40
    # a page reads its stretch of the log (twice the limit at most, reads
    # doubling), its countersignatures' targets, the closure ops it sends
    # late and its cursor: a few times the limit, wherever it starts
    assert max(rows) <= 6 * LIMIT, rows
