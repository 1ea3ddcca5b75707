"""The tips, branch-log and DID-resolution routes read what they answer,
not the chain: the rows they read through the store are the same for a
chain of 8 ops and one of 160, the tips or one page of the branch (and its
first op), whatever lies before it."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from relay import create_relay
from relay.testing.workload import WorkloadBuilder
from stores.base import FeedEntry, LogPage, OperationKind, OperationRecord
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

if TYPE_CHECKING:  # a name of the store interface the routes read through
    from stores.base import BranchPage

LIMIT = 5
SHORT, LONG = 8, 160


class CountingStore(MemoryStore):
    """A memory store that counts the op rows its reads return."""

    rows = 0

    def _count(self, n: int) -> None:
        self.rows += n

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        found = await super().read_chain_entries(chain_id, kinds, until_seq)
        self._count(len(found))
        return found

    async def read_chain_log(self, chain_id: str, after: str | None, limit: int) -> LogPage:
        page = await super().read_chain_log(chain_id, after, limit)
        self._count(len(page.entries))
        return page

    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        found = await super().read_operations(cids)
        self._count(len(found))
        return found

    async def read_chain_tips(
        self, chain_id: str, kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        found = await super().read_chain_tips(chain_id, kind, until_seq)
        self._count(len(found))
        return found

    async def read_branch(
        self,
        chain_id: str,
        kind: OperationKind,
        cid: str,
        until_seq: int,
        after: str | None,
        limit: int,
    ) -> BranchPage | None:
        page = await super().read_branch(chain_id, kind, cid, until_seq, after, limit)
        self._count(0 if page is None else len(page.entries))
        return page


def chains(n: int) -> tuple[list[str], list[tuple[str, dict[str, str]]]]:
    """An identity of ``n`` ops and a content chain of ``n`` ops forked in its
    middle, and the routes asked about them."""
    b = WorkloadBuilder(seed=n, start_ms=PAST_MS)
    alice = b.identity()
    ops = [alice.head_cid] + [b.rotate(alice) for _ in range(n - 1)]
    chain = b.content_create(alice)
    while len(chain.ops) < n:
        b.content_update(chain)
    fork = b.content_update(chain, parent=chain.ops[n // 2])
    did, content = alice.did, chain.content_id
    routes = [
        (f"/identities/{did}/tips", {}),
        (f"/content/{content}/tips", {}),
        (f"/identities/{did}/log", {"branch": alice.head_cid, "limit": str(LIMIT)}),
        (f"/identities/{did}/log", {"branch": alice.head_cid, "after": ops[-3]}),
        (f"/content/{content}/log", {"branch": fork, "limit": str(LIMIT)}),
        (f"/1.0/identifiers/{did}", {}),
    ]
    return b.tokens, routes


async def rows_per_route(n: int) -> list[int]:
    tokens, routes = chains(n)
    store = CountingStore()
    relay = create_relay(store)
    async with (
        relay.running(),
        asgi_client(relay.app) as client,
    ):
        await relay.ingest(tokens)
        counts = []
        for path, params in routes:
            store.rows = 0
            response = await client.get(path, params=params)
            assert response.status_code == 200, response.text
            counts.append(store.rows)
    return counts


async def test_fork_and_did_reads_do_not_grow_with_the_chain() -> None:
    short, long = await rows_per_route(SHORT), await rows_per_route(LONG)
    assert short == long, (short, long)
    # the tips (1, 2), a page (LIMIT), the last two ops, the genesis op
    assert long == [1, 2, LIMIT, 2, LIMIT, 1], long
