"""A bootstrap's SNAPSHOT of a chain needs the chain's tips, and that is
what it reads: the op rows its snapshot reads through the store, and the
reads themselves, are the same for chains of 8 ops and of 160, unscoped or
scoped to the chains (a scope's countersignatures are read for a page of
targets at once: there is a target per op of the scope, and a read per
target was a query per op).

It read each chain's every op to find the tips, and on a store whose reads
suspend, concurrent bootstraps each held a whole chain at once: 20 of them
over two chains of 5,000 ops peaked at +127 MiB of Python heap on SQLite
and Postgres (``bench/feed_bootstrap_memory.py``)."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from relay import create_relay
from relay.feed import snapshot
from relay.feed.filters import build_filter
from relay.feed.messages import Snapshot
from relay.testing.workload import WorkloadBuilder
from stores.base import FeedEntry, OperationKind
from tests.scope.counting_store import CountingStore
from tests.support.relay_api import PAST_MS

SHORT, LONG = 8, 160


class ChainCountingStore(CountingStore):
    """The scope tests' counting store, counting the roots, tips and pages
    of chain ops a bootstrap reads as well, and the reads."""

    reads = 0

    def _count(self, entries: list[FeedEntry]) -> list[FeedEntry]:
        self.reads += 1
        return super()._count(entries)

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


async def snapshot_rows(
    n: int, scoped: bool
) -> tuple[tuple[int, int], list[dict[str, object]], list[int]]:
    """The rows and reads of one bootstrap's snapshot over an identity of ``n`` ops
    and a content chain of ``n`` ops forked in its middle, its items, and the
    seqs of the two chains' last ops."""
    b = WorkloadBuilder(seed=n, start_ms=PAST_MS)
    alice, chain = b.long_chains(n)
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
            store.rows = store.reads = 0
            items = [m.item async for m in sub.messages() if isinstance(m, Snapshot)]
        rows = store.rows, store.reads
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


async def test_a_scoped_bootstrap_sends_every_countersignature_whatever_the_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Countersignatures of a page of targets are read at once: pages cut
    anywhere among the targets send each countersignature once."""
    b = WorkloadBuilder(seed=9, start_ms=PAST_MS)
    alice, witness = b.identity(), b.identity()
    chain = b.content_create(alice)
    for _ in range(6):
        b.content_update(chain)
    signed = [b.countersign(witness, cid) for cid, _ in chain.ops[::2]]
    signed += [b.countersign(witness, chain.ops[1][0])]
    store = ChainCountingStore()
    relay = create_relay(store)
    fields = {"mode": "bootstrap", "scope": chain.content_id}
    async with relay.running():
        await relay.ingest(b.tokens)
        sent: list[list[str]] = []
        for page in (500, 2, 1):
            monkeypatch.setattr(snapshot, "PAGE", page)
            with await relay.feed.open(build_filter(fields), "sse", "bootstrap") as sub:
                items = [m.item async for m in sub.messages() if isinstance(m, Snapshot)]
            sent.append(sorted(str(i["cid"]) for i in items if i["kind"] == "countersign"))
    assert len(signed) == len(set(sent[0])) == len(sent[0]) == 5
    assert sent[0] == sent[1] == sent[2]
