"""Which process pulls from peers: the one holding the store's ``pull`` lease.

Every process on one store (the workers of ``dfos-relay serve --workers N``
or of ``hypercorn relay.asgi:app --workers N``, relays on several hosts
sharing a Postgres database) pushes, reads through, reconciles and answers
syncs; following live peers and polling sync peers is done by one of them,
so a peer's feed is followed once per store and each in-link has one
writer. Each process asks for the lease about once a second: when its
holder stops or dies, another takes the pulling over within a few seconds,
from the cursors and link states the store holds. A process that took the
lease but could not begin gives it up and asks again less and less often
(1, 2, 4 ... up to 30 checks later), so a healthy process gets to pull.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from stores.base import StoreError
from stores.leases import Lease, LeaseStore

from .tasks import cancel_all

PULL_LEASE = "pull"
CHECK_EVERY_S = 1.0
# After begins that failed in a row, the checks skipped before asking again
# double, up to this many: a process that cannot pull (its peers' feeds
# unreachable from it, say) leaves the lease to the others most of the time.
MAX_SKIPPED_CHECKS = 30

log = logging.getLogger("dfos_relay.peering")

Step = Callable[[], Awaitable[None]]


class PullLead:
    """Runs ``begin`` when this process takes the lease and ``end`` when it
    loses it (or stops while holding it)."""

    def __init__(self, begin: Step, end: Step, every_s: float = CHECK_EVERY_S) -> None:
        self._begin = begin
        self._end = end
        self._every = every_s
        self._lease: Lease | None = None
        self._task: asyncio.Task[None] | None = None
        self.leading = False
        self._failing = False
        self._failed_begins = 0  # in a row
        self._skip = 0  # checks left to skip before asking again

    async def start(self, store: LeaseStore) -> None:
        """Ask once now (a process alone on its store starts pulling before
        this returns), then keep asking in the background."""
        self._lease = await store.lease(PULL_LEASE)
        await self._check()
        self._task = asyncio.create_task(self._run(), name="pull lease")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_all([self._task])
            self._task = None
        if self.leading:
            self.leading = False
            await self._end()
        if self._lease is not None:
            await self._lease.release()
            self._lease = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._every)
            try:
                await self._check()
            except Exception:  # a failed step must not end the loop silently
                log.exception("pull lease check failed")

    async def _check(self) -> None:
        assert self._lease is not None
        if self._skip:
            self._skip -= 1
            return
        failed = False  # a failure is logged once per streak, not once per second
        try:
            held = await self._lease.held()
        except StoreError as exc:
            failed, held = True, False
            if not self._failing:
                log.warning("pull lease: %s", exc)
        if held and not self.leading:
            self.leading = True
            log.info("this process now pulls from peers (it holds the pull lease)")
            try:
                await self._begin()
                self._failed_begins = 0
            except Exception:  # give the lease up, so that another process may pull
                failed = True
                if not self._failing:
                    log.exception("could not start pulling from peers")
                self.leading = False
                await self._end()
                await self._lease.release()
                self._failed_begins += 1
                self._skip = min(MAX_SKIPPED_CHECKS, 1 << min(self._failed_begins - 1, 5))
        elif not held and self.leading:
            self.leading = False
            log.warning("lost the pull lease: another process pulls from peers now")
            await self._end()
        self._failing = failed
