"""A purge leaves a run of log positions without ops (its epoch tells
followers to bootstrap again). A tail or live follow that starts below the
run steps over it, however long it is, and goes on to the ops after it."""

from __future__ import annotations

import asyncio

from relay.testing.workload import WorkloadBuilder, mixed_workload
from tests.support.relay_api import PAST_MS
from tests.support.whole_purge import plan_purge

from .conftest import Served, read_sse

RUN = 600  # more purged positions in a row than one read of the feed covers


async def test_a_long_run_of_purged_positions_does_not_end_a_tail(served: Served) -> None:
    relay = served.relay
    b = WorkloadBuilder(seed=301, start_ms=PAST_MS)
    victim = b.identity()
    for _ in range(RUN):
        b.artifact(victim)
    await relay.ingest(b.tokens)
    await relay.ingest(mixed_workload(20, seed=302, now_ms=PAST_MS))
    async with relay.store.moderating() as session:
        await session.apply_moderation(await plan_purge(relay.store, victim.did, PAST_MS))
    await relay.forget_purged()
    head = await relay.store.log_length()
    kept = [e.seq for e in await relay.store.read_seq_range(0, head, head)]
    assert kept[-1] == head and len(kept) < head - RUN
    events = await read_sse(served.url, "since=0")
    assert [e[1]["seq"] for e in events if e[0] == "op"] == kept
    assert events[-1][0] == "eose" and events[-1][1]["seq"] == head
    # a live follow from below the run goes on to what is committed next
    more = mixed_workload(5, seed=303, now_ms=PAST_MS)  # all new: identities of its own
    until = head + len(more)
    follower = asyncio.create_task(read_sse(served.url, f"since=0&live=true&until_seq={until}"))
    await asyncio.sleep(0.3)
    await relay.ingest(more)
    followed = await asyncio.wait_for(follower, 30)
    new = list(range(head + 1, until + 1))
    assert [e[1]["seq"] for e in followed if e[0] == "op"] == kept + new
