"""A commit with no subscription open only moves the hub's version: no
prefetch and no fan-out are prepared. A subscriber that opens later, or that
was busy writing, still sees everything committed meanwhile."""

from __future__ import annotations

import asyncio

from relay.feed.hub import FeedHub


async def _head() -> int:
    return 0


def _hub(subscribed: bool = False) -> tuple[FeedHub, list[int]]:
    hub = FeedHub(_head, subscribed=lambda: subscribed)
    prefetched: list[int] = []

    async def before_wake(head: int) -> None:
        prefetched.append(head)

    hub.before_wake = before_wake
    return hub, prefetched


async def test_a_commit_nobody_follows_prepares_no_wakeup() -> None:
    hub, prefetched = _hub()
    hub.notify(5)
    hub.notify(9)
    await asyncio.sleep(0)
    assert prefetched == []
    assert (hub.version, hub.known_head, hub.woken_head) == (2, 9, 9)


async def test_a_later_waiter_sees_the_version_moved_at_once() -> None:
    hub, _ = _hub()
    version = hub.version
    hub.notify(3)
    assert await asyncio.wait_for(hub.wait(version), 1) is True
    assert hub.woken_head == 3


async def test_with_a_subscription_open_commits_are_prefetched_and_fanned_out() -> None:
    hub, prefetched = _hub(subscribed=True)
    version = hub.version
    waiter = asyncio.create_task(hub.wait(version))
    await asyncio.sleep(0)
    hub.notify(4)
    assert await asyncio.wait_for(waiter, 1) is True
    assert prefetched == [4]
    assert hub.woken_head == 4
    await hub.close()
