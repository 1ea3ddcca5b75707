"""Several processes on one store (the workers of ``serve --workers N``,
hosts sharing one Postgres) push the ops each ingested itself to a peer:
the out-link's watermark is each one's share, merged (``relay.peering.
shares``, ``relay.peering.link_merge``). One process's claim never covers
an op another still has queued; an idle process does not hold the link
back; a process that stops cleanly leaves nothing behind unless it held ops
back; and the share of a process that vanished stops counting after
``MARK_STALE_MS``, its watermark carried by a live process as a floor until
a reconciliation pushes. Two ledgers on two handles of one real store stand
for two processes (seqs are the ledger's: no ops are written)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from relay.peering.ledger import LinkLedger
from relay.peering.link_merge import MARK_STALE_MS
from relay.peering.watermark import OutLinks
from relay.rules.outcomes import SequencedOp
from stores.base import FULL_SCOPE, LinkRecord, RelayStore
from tests.stores.conftest import reopen

URL = "https://peer.example"
EVERY_MS = 50


@dataclass
class Process:
    ledger: LinkLedger
    links: OutLinks
    now: list[int]  # its wall clock, ms

    def ingest(self, seq: int) -> None:
        """Op ``seq`` committed here and queued for the peer."""
        self.links.offered([SequencedOp(f"bafy{seq}", f"tok{seq}", "artifact", "did:dfos:x",
                                        seq, 0, "did:dfos:x")])  # fmt: skip
        self.links.queued(URL, [f"tok{seq}"])
        self.links.offer_done([URL])

    def shown(self) -> str | None:
        """The out-link's watermark as this process shows it (GET /peers)."""
        (out,) = [r for r in self.ledger.links() if r.direction == "out"]
        return out.applied_token


@pytest.fixture
async def two(store: RelayStore) -> AsyncIterator[tuple[Process, Process]]:
    await store.open()
    other = reopen(store)
    if other is not store:
        await other.open()
    made = []
    for handle in (store, other):
        now = [1_000_000]
        ledger = LinkLedger(clock_ms=lambda now=now: now[0], persist_every_ms=EVERY_MS)
        await ledger.start(handle)
        links = OutLinks(ledger)
        links.start([URL], 0)
        await ledger.flush()
        made.append(Process(ledger, links, now))
    try:
        yield made[0], made[1]
    finally:
        for process in made:
            await process.ledger.stop()
        if other is not store:
            await other.close()
        await store.close()


async def eventually(check: Callable[[], bool], timeout_s: float = 3.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(EVERY_MS / 1000)
    return check()


async def stored_out(store: RelayStore) -> LinkRecord:
    stored = await store.get_link(URL, FULL_SCOPE, "out")
    assert stored is not None
    return stored


async def test_one_process_cannot_vouch_for_an_op_another_has_queued(
    two: tuple[Process, Process], store: RelayStore
) -> None:
    """b has op 1 queued; a delivered op 2. One shared row, last write wins,
    let a claim 2 (op 1 delivered too); merged, the link holds at 0."""
    a, b = two
    b.ingest(1)
    a.ingest(2)
    await a.links.delivered(URL, ["tok2"])
    await b.ledger.flush()
    await a.ledger.flush()  # a writes last
    assert a.links.watermark(URL) == 2  # a's own share: op 1 is not a's to push
    assert await eventually(lambda: a.shown() == b.shown() == "0"), (a.shown(), b.shown())
    a.ingest(3)
    await a.links.delivered(URL, ["tok3"])
    await a.ledger.flush()
    assert (await stored_out(store)).applied_token == "0"  # the shared row, as a wrote it
    await b.links.delivered(URL, ["tok1"])
    await b.ledger.flush()
    assert await eventually(lambda: a.shown() == "1")  # a's head: 3, b's: 1


async def test_an_idle_process_follows_the_head_only_when_its_ops_were_offered(
    two: tuple[Process, Process],
) -> None:
    """b ingests nothing: ops up to the store's head are not b's to push,
    so b's share follows it, and the link moves with a's pushes; but not
    while an op of b's own may be committed and not offered yet."""
    a, b = two
    a.ingest(1)
    a.ingest(2)
    await a.links.delivered(URL, ["tok1", "tok2"])

    async def head() -> int:
        return 2

    await b.links.follow_head(head, lambda: False)  # b is telling its listeners of a commit
    assert b.links.watermark(URL) == 0
    await b.links.follow_head(head, lambda: True)
    assert b.links.watermark(URL) == 2
    await b.ledger.flush()
    assert await eventually(lambda: a.shown() == "2")


async def test_a_merge_written_while_a_gone_share_is_carried_is_written_again(
    two: tuple[Process, Process], store: RelayStore
) -> None:
    """a writes the link between carrying b's gone share and deleting it
    (a repair that lands then): that write still merged b's share in, so
    once it is deleted the shared row is written again without it."""
    a, b = two

    async def carry_then_repair(share: LinkRecord) -> None:
        a.links.adopt(share, 2)
        await a.links.repaired(URL, 2)  # written while b's share is still counted

    a.ledger.shares.on_gone = carry_then_repair
    await a.links.follow_head(_at(2), lambda: True)  # ops 1 and 2 are b's
    b.ingest(1)
    await b.links.delivered(URL, ["tok1"])
    b.ingest(2)
    b.links.lost(URL, ["tok2"])
    await b.ledger.stop()  # leaves its share behind, held at 1
    a.ledger.shares.heard(await store.list_out_marks())
    await a.ledger.clear_gone_shares()
    assert {m.writer for m in await store.list_out_marks()} <= {a.ledger.shares.writer}
    assert a.shown() == "2"
    assert (await stored_out(store)).applied_token == "2"  # before: "1", until a's next write


async def b_pushed_one_of_two(a: Process, b: Process) -> list[LinkRecord]:
    """Ops 1 and 2 are b's, op 1 pushed; a carries a gone share as a floor
    of its own (into the list returned)."""
    carried: list[LinkRecord] = []

    async def carry(share: LinkRecord) -> None:
        carried.append(share)
        a.links.adopt(share, 2)

    a.ledger.shares.on_gone = carry
    await a.links.follow_head(_at(2), lambda: True)
    b.ingest(1)
    await b.links.delivered(URL, ["tok1"])
    b.ingest(2)
    return carried


async def test_a_clean_stop_leaves_a_share_only_when_it_held_ops_back(
    two: tuple[Process, Process], store: RelayStore
) -> None:
    """b stops with op 2 lost: its share is left behind, and a carries it
    at once (its next flush) until a reconciliation pushed; a then stops
    holding nothing back, and leaves nothing behind."""
    a, b = two
    carried = await b_pushed_one_of_two(a, b)
    await b.ledger.flush()
    assert await eventually(lambda: a.shown() == "1")
    b.links.lost(URL, ["tok2"])  # still queued when b stops
    await b.ledger.stop()
    assert await eventually(lambda: len(carried) == 1)
    assert carried[0].applied_token == "1" and carried[0].updated_ms == 0
    assert a.links.watermark(URL) == 1 and a.ledger.get(URL, "out").state == "repairing"
    await a.links.repaired(URL, 2)
    assert a.links.watermark(URL) == 2 and a.ledger.get(URL, "out").state == "live"
    await a.ledger.stop()
    assert await store.list_out_marks() == []
    assert (await stored_out(store)).applied_token == "2"


async def test_a_share_carried_but_not_yet_deleted_is_deleted_at_stop_and_not_carried_again(
    two: tuple[Process, Process], store: RelayStore
) -> None:
    """The flush task may be stopped between carrying a gone share and
    deleting it (a stop right then): the carry is not done twice (a second
    one would take the watermark back under what a repair since pushed),
    and the stop deletes the share once its own is written."""
    a, b = two
    carried = await b_pushed_one_of_two(a, b)
    b.links.lost(URL, ["tok2"])
    await b.ledger.stop()  # leaves its share behind, held at 1

    async def not_written() -> bool:
        return False

    a.ledger.shares.heard(await store.list_out_marks())
    await a.ledger.shares.clear_gone(store, a.now[0], not_written)  # carried, then stopped
    assert len(carried) == 1
    assert b.ledger.shares.writer in {m.writer for m in await store.list_out_marks()}
    await a.links.repaired(URL, 2)
    await a.ledger.shares.clear_gone(store, a.now[0], not_written)
    assert len(carried) == 1 and a.links.watermark(URL) == 2  # not carried again
    await a.ledger.stop()
    assert await store.list_out_marks() == []
    assert (await stored_out(store)).applied_token == "2"


async def test_a_vanished_process_stops_holding_the_link_after_the_stale_while(
    two: tuple[Process, Process],
) -> None:
    """b dies with op 1 queued (no stop: its flush task just ends). Its
    share holds the link for ``MARK_STALE_MS``; then a clears it, and holds
    its own share below what b may have lost until a reconciliation pushed."""
    a, b = two

    async def carry(share: LinkRecord) -> None:
        a.links.adopt(share, 3)

    a.ledger.shares.on_gone = carry
    b.ingest(1)
    await b.ledger.flush()
    await _vanish(b)
    a.ingest(2)
    a.ingest(3)
    await a.links.delivered(URL, ["tok2", "tok3"])
    await a.ledger.flush()
    await asyncio.sleep(5 * EVERY_MS / 1000)
    assert a.shown() == "0"  # b's share still counts
    a.now[0] += MARK_STALE_MS + 1
    assert await eventually(lambda: a.ledger.shares.others(URL, FULL_SCOPE) == [])
    assert a.shown() == "0" and a.ledger.get(URL, "out").state == "repairing"
    await a.links.repaired(URL, 3)  # a reconciliation pushed everything up to 3
    assert a.shown() == "3" and a.ledger.get(URL, "out").state == "live"


async def _vanish(process: Process) -> None:
    flusher = process.ledger._flusher
    assert flusher is not None
    flusher.cancel()
    await asyncio.gather(flusher, return_exceptions=True)
    process.ledger._flusher = None
    process.ledger._store = None  # its stop writes nothing: it is gone


def _at(seq: int) -> Callable[[], Awaitable[int]]:
    async def read() -> int:
        return seq

    return read
