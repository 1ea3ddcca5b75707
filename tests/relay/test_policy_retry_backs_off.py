"""``relay.ingest.retry.PolicyRetry``: ops kept through a policy error are
tried again after a delay that doubles while they are kept again, capped,
back to the first once a try keeps none; never sooner than
``MIN_RETRY_DELAY_S``, whatever the settings say; once at start, and, while
nothing is known to be kept, every ``most`` seconds (ops other processes
kept); nothing runs once it is stopped."""

from __future__ import annotations

import asyncio
import itertools
import time

from relay.ingest.retry import MIN_RETRY_DELAY_S, PolicyRetry


class Kept:
    """A retry target that keeps ops on its first ``failures`` tries, timing
    each try."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.tries: list[float] = []

    async def attempt(self) -> int:
        self.tries.append(time.monotonic())
        return 1 if len(self.tries) <= self.failures else 0


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


async def _until(kept: Kept, tries: int) -> None:
    while len(kept.tries) < tries:
        await asyncio.sleep(0.01)


async def test_the_delay_doubles_up_to_the_cap_then_starts_afresh() -> None:
    kept = Kept(failures=3)
    retry = PolicyRetry(kept.attempt, lambda: (0.05, 0.1))
    started = time.monotonic()
    retry.start()  # a first try at start: it finds ops kept
    try:
        await _until(kept, 4)
        first, *doubled = _gaps([started, *kept.tries])  # 0.05, then 0.1, 0.1 (capped), 0.1
        assert 0.045 <= first < 0.095, first
        assert all(0.095 <= gap < 0.3 for gap in doubled), doubled
        later = time.monotonic()
        retry.schedule()  # a new episode: the first delay again
        await _until(kept, 5)
        assert kept.tries[-1] - later < 0.09
    finally:
        await retry.stop()
    assert not retry.running


async def test_while_nothing_is_kept_the_store_is_looked_at_every_most_seconds() -> None:
    kept = Kept(failures=0)  # ops another process kept would be found so
    retry = PolicyRetry(kept.attempt, lambda: (0.05, 0.2))
    retry.start()
    try:
        await asyncio.sleep(1.0)
    finally:
        await retry.stop()
    # at start (after 0.05 s), then every 0.2 + 0.05 s: about 4
    assert 3 <= len(kept.tries) <= 5, kept.tries
    assert all(gap >= 0.24 for gap in _gaps(kept.tries)), _gaps(kept.tries)


async def test_a_zero_delay_is_not_a_busy_loop() -> None:
    kept = Kept(failures=10**6)
    retry = PolicyRetry(kept.attempt, lambda: (0.0, 0.0))
    retry.start()
    try:
        retry.schedule()
        await asyncio.sleep(0.5)
    finally:
        await retry.stop()
    assert len(kept.tries) <= 0.5 / MIN_RETRY_DELAY_S + 1
    count = len(kept.tries)
    await asyncio.sleep(0.2)
    assert len(kept.tries) == count  # stopped: nothing tries any more


async def test_an_idle_zero_delay_is_not_a_busy_loop() -> None:
    kept = Kept(failures=0)
    retry = PolicyRetry(kept.attempt, lambda: (0.0, 0.0))
    retry.start()
    try:
        await asyncio.sleep(0.5)
    finally:
        await retry.stop()
    assert len(kept.tries) <= 0.5 / MIN_RETRY_DELAY_S + 1
