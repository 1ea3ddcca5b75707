"""``relay.ingest.retry.PolicyRetry``: ops kept through a policy error are
tried again after a delay that doubles while they are kept again, capped,
back to the first once a try keeps none; never sooner than
``MIN_RETRY_DELAY_S``, whatever the settings say; nothing runs once it is
stopped."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Collection

from relay.ingest.retry import MIN_RETRY_DELAY_S, PolicyRetry


class Kept:
    """A retry target that keeps its ops ``failures`` times, timing each try."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.tries: list[tuple[float, frozenset[str]]] = []
        self.retry: PolicyRetry | None = None

    async def attempt(self, cids: Collection[str]) -> int:
        self.tries.append((time.monotonic(), frozenset(cids)))
        if len(self.tries) <= self.failures:
            assert self.retry is not None
            self.retry.schedule(cids)  # kept again, as the ingestor reports it
            return 0
        return len(cids)


def _gaps(kept: Kept, since: float) -> list[float]:
    times = [since] + [t for t, _ in kept.tries]
    return [b - a for a, b in itertools.pairwise(times)]


async def test_the_delay_doubles_up_to_the_cap_then_starts_afresh() -> None:
    kept = Kept(failures=3)
    retry = kept.retry = PolicyRetry(kept.attempt, lambda: (0.05, 0.1))
    retry.start()
    try:
        started = time.monotonic()
        retry.schedule({"a"})
        while len(kept.tries) < 4:
            await asyncio.sleep(0.01)
        first, *doubled = _gaps(kept, started)  # 0.05, then 0.1, 0.1 (capped), 0.1
        assert 0.045 <= first < 0.095, first
        assert all(0.095 <= gap < 0.3 for gap in doubled), doubled
        assert {cids for _, cids in kept.tries} == {frozenset({"a"})}
        later = time.monotonic()
        retry.schedule({"b"})  # a new episode: the first delay again
        while len(kept.tries) < 5:
            await asyncio.sleep(0.01)
        assert kept.tries[-1][0] - later < 0.09
    finally:
        await retry.stop()
    assert not retry.running


async def test_a_zero_delay_is_not_a_busy_loop() -> None:
    kept = Kept(failures=10**6)
    retry = kept.retry = PolicyRetry(kept.attempt, lambda: (0.0, 0.0))
    retry.start()
    try:
        retry.schedule({"a"})
        await asyncio.sleep(0.5)
    finally:
        await retry.stop()
    assert len(kept.tries) <= 0.5 / MIN_RETRY_DELAY_S + 1
    count = len(kept.tries)
    await asyncio.sleep(0.2)
    assert len(kept.tries) == count  # stopped: nothing tries any more
