"""Of the processes on one store, the one holding its pull lease pulls: it
begins when it takes the lease and ends when it loses it or stops; a process
that cannot begin gives the lease up for another; a store that cannot answer
is logged once per outage. (Two leads on one store stand for two processes;
real processes are in test_one_process_per_store_pulls.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from relay.peering.lead import PullLead
from stores.base import StoreError
from stores.leases import Lease
from stores.memory import MemoryStore

EVERY_S = 0.02


class Steps:
    def __init__(self, fail_begin: bool = False) -> None:
        self.log: list[str] = []
        self.fail_begin = fail_begin

    async def begin(self) -> None:
        self.log.append("begin")
        if self.fail_begin:
            raise RuntimeError("cannot reach the peers' feeds")

    async def end(self) -> None:
        self.log.append("end")


async def settle() -> None:
    await asyncio.sleep(EVERY_S * 5)


async def test_one_lead_pulls_and_the_other_takes_over_when_it_stops() -> None:
    store = MemoryStore()
    one, two = Steps(), Steps()
    first = PullLead(one.begin, one.end, EVERY_S)
    second = PullLead(two.begin, two.end, EVERY_S)
    await first.start(store)
    assert one.log == ["begin"]  # alone on its store: pulling before start returns
    await second.start(store)
    await settle()
    assert (first.leading, second.leading, two.log) == (True, False, [])
    await first.stop()
    assert one.log == ["begin", "end"]
    await settle()
    assert second.leading and two.log == ["begin"]
    await second.stop()
    assert two.log == ["begin", "end"]


async def test_a_lead_that_cannot_begin_gives_the_lease_up() -> None:
    store = MemoryStore()
    failing, healthy = Steps(fail_begin=True), Steps()
    first = PullLead(failing.begin, failing.end, EVERY_S)
    await first.start(store)
    assert not first.leading and failing.log[:2] == ["begin", "end"]
    second = PullLead(healthy.begin, healthy.end, EVERY_S)
    await second.start(store)  # asks before the failing one asks again
    assert second.leading and healthy.log == ["begin"]
    await settle()
    assert second.leading and not first.leading  # the holder keeps it
    await first.stop()
    await second.stop()


async def test_a_begin_that_keeps_failing_is_logged_once_and_retried_less_often(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing = Steps(fail_begin=True)
    lead = PullLead(failing.begin, failing.end, EVERY_S)
    with caplog.at_level(logging.ERROR, logger="dfos_relay.peering"):
        await lead.start(MemoryStore())
        await asyncio.sleep(EVERY_S * 40)
        await lead.stop()
    # asked at the start, then after skipping 1, 2, 4, 8 and 16 checks: at
    # most 6 begins in ~40 checks (a timer running late only lowers that)
    assert 3 <= failing.log.count("begin") <= 6 and not lead.leading
    assert sum("could not start" in r.getMessage() for r in caplog.records) == 1


async def test_a_lead_whose_begin_recovers_pulls() -> None:
    flaky = Steps(fail_begin=True)
    lead = PullLead(flaky.begin, flaky.end, EVERY_S)
    await lead.start(MemoryStore())
    assert not lead.leading
    flaky.fail_begin = False
    await settle()  # the skipped check, then a begin that succeeds
    assert lead.leading and flaky.log[-1] == "begin"
    await lead.stop()
    assert flaky.log[-1] == "end"


class Unreachable:
    """A store whose lease cannot be asked for (its file or server is gone)."""

    def __init__(self) -> None:
        self.asked = 0

    async def lease(self, name: str) -> Lease:
        return self

    async def held(self) -> bool:
        self.asked += 1
        raise StoreError("lease file /nowhere/relay.db-pull.lease: No such file or directory")

    async def release(self) -> None:
        return None


async def test_an_unreachable_lease_is_not_held_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    steps, store = Steps(), Unreachable()
    lead = PullLead(steps.begin, steps.end, EVERY_S)
    with caplog.at_level(logging.WARNING, logger="dfos_relay.peering"):
        await lead.start(store)
        await settle()
        await lead.stop()
    assert store.asked > 2 and steps.log == [] and not lead.leading
    assert sum("pull lease" in r.getMessage() for r in caplog.records) == 1
