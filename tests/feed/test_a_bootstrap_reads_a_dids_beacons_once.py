"""Every beacon a DID sends stays in the log, and a bootstrap shows only the
latest of each DID at its snapshot. Deciding that costs one read of a DID's
beacons, not one per beacon: a DID beaconing every minute for a week must
not make every bootstrap quadratic in its beacons."""

from __future__ import annotations

from collections.abc import Collection

from relay import create_relay
from relay.feed.filters import FeedFilter
from relay.feed.snapshot import snapshot_items
from relay.testing.workload import WorkloadBuilder
from stores.base import FeedEntry, OperationKind
from stores.memory import MemoryStore
from tests.support.relay_api import PAST_MS

BEACONS = 300


class CountingStore(MemoryStore):
    """A memory store that counts the rows its chain reads return."""

    rows = 0

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        found = await super().read_chain_entries(chain_id, kinds, until_seq)
        self.rows += len(found)
        return found


async def test_a_bootstrap_reads_each_dids_beacons_once_and_shows_the_latest_at_its_snapshot() -> (
    None
):
    b = WorkloadBuilder(seed=4, start_ms=PAST_MS, step_ms=1000)
    busy, quiet = b.identity(), b.identity()
    before = [b.beacon(busy if i % 10 else quiet) for i in range(BEACONS)]
    after_snapshot = [b.beacon(busy), b.beacon(quiet)]
    store = CountingStore()
    relay = create_relay(store)
    async with relay.running():
        for start in range(0, len(b.tokens) - 2, 100):
            await relay.ingest(b.tokens[start : min(start + 100, len(b.tokens) - 2)])
        snapshot = await store.log_length()
        await relay.ingest(after_snapshot)  # newer beacons, after the snapshot
        store.rows = 0
        items = [i async for i in snapshot_items(store, snapshot, FeedFilter(mode="bootstrap"))]
    beacons = {i["author"]: i["cid"] for i in items if i["kind"] == "beacon"}
    latest = {busy.did: before[-1], quiet.did: before[-10]}
    assert beacons == latest
    # one read of each DID's beacons (~300 rows), not one per beacon (~45,000)
    assert store.rows <= 2 * BEACONS + 50, store.rows
