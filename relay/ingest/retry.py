"""Retrying buffered ops the write policy failed on (``policy-error``).

An op answered waiting that the policy raised on or timed out on, once its
dependencies were met, stays in the pending buffer waiting for the policy
(``stores.base.waits_for_policy``; see ``_kept_through`` in ``pipeline.py``):
its sender will not send it again, and nothing else would wake it. The
relay tries those ops again by itself, through ``Ingestor.retry_kept`` (the
same serialized sequencing as any op, so ordering and locking are those of
a request), after a delay that doubles while the policy keeps failing on
them: ``WritePolicy.retry_first_s`` up to ``retry_max_s``, and back to the
first once a retry leaves nothing kept (never less than
``MIN_RETRY_DELAY_S``). So a policy that always fails costs one session per
``retry_max_s``, not a busy loop; while the policy hangs, each such session
holds the sequencer up to its policy budget, as any op's would.

One task, owned by the relay: started after the restart's drain, cancelled
by ``stop``. What it does not do: retry ops another process kept (each
process retries what it kept; a restart's drain tries every buffered op),
or give up on an op (it stays buffered, and visible as waiting for the
policy, until the policy decides or an operator drops it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection

log = logging.getLogger("dfos_relay.policy")

Attempt = Callable[[Collection[str]], Awaitable[int]]  # ``Ingestor.retry_kept``
Delays = Callable[[], tuple[float, float]]  # (first, most) seconds, read at each wait
# the shortest wait between two retries, whatever the policy's settings say:
# a delay of 0 would make a policy that always fails a busy loop
MIN_RETRY_DELAY_S = 0.05


class PolicyRetry:
    def __init__(self, attempt: Attempt, delays: Delays) -> None:
        self._attempt = attempt
        self._delays = delays
        self._due: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.attempts = 0  # retry sessions run, for tests and logs

    def schedule(self, cids: Collection[str]) -> None:
        """``cids`` were kept through a policy error: try them again later."""
        self._due.update(cids)
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="dfos-relay policy retry")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _loop(self) -> None:
        delay: float | None = None
        while True:
            await self._wake.wait()
            first, most = self._delays()
            delay = first if delay is None else min(delay * 2, max(most, first))
            delay = max(delay, MIN_RETRY_DELAY_S)
            await asyncio.sleep(delay)
            self._wake.clear()
            cids, self._due = self._due, set()
            self.attempts += 1
            try:
                sequenced = await self._attempt(cids)
            except Exception:  # the store failed: the ops are still buffered
                log.exception("retrying %d ops kept through a policy error failed", len(cids))
                self.schedule(cids)
                continue
            if sequenced:
                log.info("sequenced %d ops kept through a policy error", sequenced)
            if not cids & self._due:  # the policy decided on them: start afresh
                delay = None
