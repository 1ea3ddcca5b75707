"""The link ledger writes through to the store: a state change or a new
failure at once, token progress at most once per interval per link (the
flush on stop writes the rest); a paused link is loaded paused, and only a
resume leaves ``paused``."""

from __future__ import annotations

from relay.peering.ledger import LinkLedger
from stores.base import FULL_SCOPE, LinkRecord
from stores.memory import MemoryStore

URL = "https://peer.example"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


async def stored(store: MemoryStore) -> LinkRecord | None:
    return await store.get_link(URL, FULL_SCOPE, "in")


async def test_state_at_once_progress_throttled_rest_on_stop() -> None:
    store, clock = MemoryStore(), Clock()
    ledger = LinkLedger(clock, persist_every_ms=1_000)
    await ledger.start(store)
    await ledger.set_state(URL, "in", "live")
    assert (await stored(store)) == ledger.get(URL, "in")  # the first write is at once

    await ledger.update(URL, "in", applied_token="e.1")
    record = await stored(store)
    assert record is not None and record.applied_token is None  # within the interval
    await ledger.failure(URL, "in", ConnectionError("refused"))
    record = await stored(store)
    assert record is not None and (record.failures, record.applied_token) == (1, "e.1")

    clock.ms += 200
    await ledger.update(URL, "in", applied_token="e.2")
    clock.ms += 1_000
    await ledger.update(URL, "in", applied_token="e.3")
    record = await stored(store)
    assert record is not None and record.applied_token == "e.3"
    assert record.last_error == "ConnectionError: refused"

    await ledger.update(URL, "in", applied_token="e.4")
    await ledger.stop()
    record = await stored(store)
    assert record is not None and record.applied_token == "e.4"


async def test_a_pause_is_kept_across_a_restart_until_resumed() -> None:
    store, clock = MemoryStore(), Clock()
    first = LinkLedger(clock)
    await first.start(store)
    await first.pause(URL)
    await first.set_state(URL, "in", "live")  # replication cannot leave paused
    assert first.get(URL, "in").state == "paused"
    await first.stop()

    again = LinkLedger(clock)
    await again.start(store)
    assert again.paused(URL, "in") and again.paused(URL, "out")
    await again.resume(URL, ["in"])
    assert not again.paused(URL, "in") and again.paused(URL, "out")
    record = await stored(store)
    assert record is not None and record.state == "initial"
    await again.stop()
