"""Per-peer exponential backoff (WEB-RELAY.md "Peering").

After a failure a peer is skipped by every behavior until its delay passes;
each further failure doubles the delay up to a cap, and one success resets
it. Every failure is logged here, once, with the peer URL. Memory is one
small record per configured peer.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("dfos_relay.peering")


@dataclass(slots=True)
class _PeerState:
    failures: int = 0
    retry_at: float = 0.0


class Backoff:
    def __init__(
        self,
        base_s: float,
        max_s: float,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._base = base_s
        self._max = max_s
        self._clock = clock
        self._jitter = jitter
        self._peers: dict[str, _PeerState] = {}

    def ready(self, peer_url: str) -> bool:
        state = self._peers.get(peer_url)
        return state is None or self._clock() >= state.retry_at

    def delay(self, peer_url: str) -> float:
        """Seconds until ``peer_url`` may be tried again (0 when ready)."""
        state = self._peers.get(peer_url)
        return 0.0 if state is None else max(0.0, state.retry_at - self._clock())

    def failures(self, peer_url: str) -> int:
        state = self._peers.get(peer_url)
        return 0 if state is None else state.failures

    def failure(self, peer_url: str, behavior: str, exc: BaseException) -> float:
        """Record and log a failure; returns the delay now in force."""
        state = self._peers.setdefault(peer_url, _PeerState())
        state.failures += 1
        delay = min(self._max, self._base * 2 ** (state.failures - 1))
        delay *= 0.5 + 0.5 * self._jitter()  # spread retries of many relays
        state.retry_at = self._clock() + delay
        log.warning(
            "peer %s: %s failed (%s: %s); backing off %.1fs after %d failure(s)",
            peer_url,
            behavior,
            type(exc).__name__,
            exc,
            delay,
            state.failures,
        )
        return delay

    def success(self, peer_url: str) -> None:
        if self._peers.pop(peer_url, None) is not None:
            log.info("peer %s: reachable again", peer_url)
