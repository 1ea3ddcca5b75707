"""A bootstrap's SNAPSHOT of a chain needs the chain's tips, and that is
what it reads: the op rows its snapshot reads through the store are the
same for chains of 8 ops and of 160, unscoped or scoped to the chains.

It read each chain's every op to find the tips, and on a store whose reads
suspend, concurrent bootstraps each held a whole chain at once: 20 of them
over two chains of 5,000 ops peaked at +127 MiB of Python heap on SQLite
and Postgres (``bench/feed_bootstrap_memory.py``)."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from relay import create_relay
from relay.feed.filters import build_filter
from relay.feed.messages import Snapshot
from relay.testing.workload import WorkloadBuilder
from stores.base import FeedEntry, OperationKind
from tests.scope.counting_store import CountingStore
from tests.support.relay_api import PAST_MS

SHORT, LONG = 8, 160


class ChainCountingStore(CountingStore):
    """The scope tests' counting store, counting the roots, tips and pages
    of chain ops a bootstrap reads as well."""

    async def read_roots(
        self, until_seq: int, after: tuple[int, str] | None, limit: int
    ) -> list[FeedEntry]:
        return self._count(await super().read_roots(until_seq, after, limit))

    async def read_chain_tips(
        self, chain_id: str, kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        return self._count(await super().read_chain_tips(chain_id, kind, until_seq))

    async def read_chains_tips(
        self, chain_ids: Collection[str], kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        return self._count(await super().read_chains_tips(chain_ids, kind, until_seq))

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        found = await super().read_chains_entries_after(
            chain_ids, kinds, after_seq, until_seq, limit
        )
        return self._count(found)


async def snapshot_rows(n: int, scoped: bool) -> tuple[int, list[dict[str, object]], list[int]]:
    """The rows one bootstrap's snapshot reads over an identity of ``n`` ops
    and a content chain of ``n`` ops forked in its middle, its items, and the
    seqs of the two chains' last ops."""
    b = WorkloadBuilder(seed=n, start_ms=PAST_MS)
    alice = b.identity()
    for _ in range(n - 1):
        b.rotate(alice)
    chain = b.content_create(alice)
    while len(chain.ops) < n:
        b.content_update(chain)
    b.content_update(chain, parent=chain.ops[n // 2])
    store = ChainCountingStore()
    relay = create_relay(store)
    fields = {"mode": "bootstrap"}
    if scoped:
        fields["scope"] = f"{alice.did},{chain.content_id}"
    async with relay.running():
        await relay.ingest(b.tokens)
        # admission computes a scope's closure (its own reads); counted from here
        with await relay.feed.open(build_filter(fields), "sse", "bootstrap") as sub:
            store.rows = 0
            items = [m.item async for m in sub.messages() if isinstance(m, Snapshot)]
        rows = store.rows
        last = [
            (await store.read_chain_entries(alice.did, ["identity-op"], 10**9))[-1].seq,
            (await store.read_chain_entries(chain.content_id, ["content-op"], 10**9))[-1].seq,
        ]
    return rows, items, last


@pytest.mark.parametrize("scoped", [False, True], ids=["unscoped", "scoped"])
async def test_a_bootstrap_reads_the_tips_of_a_chain_whatever_its_length(scoped: bool) -> None:
    (short, _, _), (long, items, last) = (
        await snapshot_rows(SHORT, scoped),
        await snapshot_rows(LONG, scoped),
    )
    assert short == long, (short, long)
    identity, content = (next(i for i in items if i["kind"] == k) for k in ("identity", "content"))
    assert [t["head"] for t in identity["tips"]] == [True]  # type: ignore[attr-defined]
    assert len(content["tips"]) == 2  # type: ignore[arg-type]
    assert [identity["seq"], content["seq"]] == last  # each chain's last op up to S
