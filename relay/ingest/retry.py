"""Retrying buffered ops the write policy failed on (``policy-error``).

An op answered waiting that the policy raised on or timed out on, once its
dependencies were met, stays in the pending buffer waiting for the policy
(``stores.base.waits_for_policy``; see ``_kept_through`` in ``pipeline.py``):
its sender will not send it again, and nothing else would wake it. The
relay tries those ops again by itself, through ``Ingestor.retry_kept``:
every op the store keeps so, whichever process kept it (another worker on
the same store, or this one before a restart), through the same serialized
sequencing as any op, with the policy asked outside the sequencing session
(so a hanging policy holds up no other ingestion).

When: once at start, then whenever this process keeps an op (``schedule``),
after a delay that doubles while a retry keeps ops again:
``WritePolicy.retry_first_s`` up to ``retry_max_s``, and back to the first
once a retry keeps none (never less than ``MIN_RETRY_DELAY_S``). While
nothing is known to be kept, the store is looked at every ``retry_max_s``
for ops other processes kept. So a policy that always fails costs one retry
per ``retry_max_s`` and process, not a busy loop. Two processes retrying one
op is harmless: sessions are serialized across processes, and the second
finds it sequenced (a duplicate) or still kept. An op that has waited for the
policy ``WritePolicy.retry_give_up_s`` is rejected when the policy fails on it
again (``Ingestor.retry_kept``).

One task, owned by the relay: started after the restart's drain, cancelled
by ``stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("dfos_relay.policy")

Attempt = Callable[[], Awaitable[int]]  # ``Ingestor.retry_kept``: how many it kept again
Delays = Callable[[], tuple[float, float]]  # (first, most) seconds, read at each wait
# the shortest wait between two retries, whatever the policy's settings say:
# a delay of 0 would make a policy that always fails a busy loop
MIN_RETRY_DELAY_S = 0.05


class PolicyRetry:
    def __init__(self, attempt: Attempt, delays: Delays) -> None:
        self._attempt = attempt
        self._delays = delays
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.attempts = 0  # retries run, for tests and logs

    def schedule(self) -> None:
        """Ops were kept through a policy error: retry soon (the retry reads
        every kept op from the store, so which ones is not needed)."""
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._wake.set()  # look for kept ops at start
            self._task = asyncio.create_task(self._loop(), name="dfos-relay policy retry")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _loop(self) -> None:
        delay: float | None = None  # None: no retry kept ops last time
        while True:
            first, most = self._delays()
            if delay is None:
                # told of a kept op, or the store looked at every ``most``;
                # not ``wait_for``: on 3.11 it swallows a cancel that comes as
                # the event is set (at start), and ``stop`` then waits for ever
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(most, MIN_RETRY_DELAY_S)):
                        await self._wake.wait()
                delay = first
            else:
                delay = min(delay * 2, max(most, first))
            delay = max(delay, MIN_RETRY_DELAY_S)
            await asyncio.sleep(delay)
            self._wake.clear()
            self.attempts += 1
            try:
                kept = await self._attempt()
            except Exception:  # the store failed: the ops are still buffered
                log.exception("retrying ops kept through a policy error failed")
                continue
            if kept:
                log.info("%d ops kept through a policy error again", kept)
            else:
                delay = None  # the policy decided on them: start afresh
