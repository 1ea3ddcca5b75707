"""A Postgres server that goes away (stopped, restarting, the network to it
cut) makes every store call fail with ``StoreError``, as the store interface
promises for a backend failure: the callers that must outlive it (the link
ledger, the feed hub, the peering loops) catch that, and nothing else.

Before, only a statement's own errors were mapped: taking a pool connection
(which opens a new one when the old ones were closed) and starting a
transaction raised the driver's errors as they were (``OSError``,
``asyncpg`` errors), past those callers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from stores.base import FULL_SCOPE, LinkRecord, RelayStore, StoreError
from stores.postgres import PostgresStore
from tests.stores.conftest import append, op
from tests.support.backends import PG_URL, pg_schema, selected_backends
from tests.support.freezing_proxy import FreezingProxy, through

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif("postgres" not in selected_backends(), reason="postgres not selected"),
]

CALLS: dict[str, Callable[[RelayStore], Awaitable[object]]] = {
    "ping": lambda s: s.ping(),
    "log_length": lambda s: s.log_length(),
    "read_log": lambda s: s.read_log(None, 10),
    "get_operation": lambda s: s.get_operation("bafyop1"),
    "commit": lambda s: append(s, op("bafyop2", at=2000)),
    "put_link": lambda s: s.put_link(LinkRecord("https://a.example", FULL_SCOPE, "out")),
}


@pytest.fixture
async def gone() -> AsyncIterator[RelayStore]:
    """An opened store with one op, whose server then went away: the
    connections it held are closed, and new ones are refused."""
    async with pg_schema() as schema:
        proxy = FreezingProxy("127.0.0.1", 5432)
        async with proxy.serving():
            store = PostgresStore(through(proxy, PG_URL), schema=schema, pool_max=2)
            await store.open()
            await append(store, op("bafyop1"))
        try:
            yield store
        finally:
            await store.close()


@pytest.mark.parametrize("call", sorted(CALLS))
async def test_a_call_on_a_store_whose_server_is_gone_raises_store_error(
    gone: RelayStore, call: str
) -> None:
    with pytest.raises(StoreError):
        await CALLS[call](gone)
