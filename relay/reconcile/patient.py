"""A run's calls to its peer, waiting out the peer's busy answers.

A relay that runs its bound of long rounds at once (``MAX_LONG_ROUNDS``)
answers one more with 503 and ``Retry-After``; a rate limit in front of it
may answer 429 so. The client raises ``PeerBusy`` for those (only on the
sync routes). That is no fault of the peer: the same request is sent
again after the seconds it asked for (at most ``wait_max_s``, stretched a
little so the relays it turned away together do not all come back at once),
up to ``waits`` times a run. A busy answer past that, or one asking to wait
past the run's deadline, is ``PeerStayedBusy``, and the run fails like any
other: a peer that is always busy is backed off and shown failing.

Pushes (``POST /operations``) are passed through as they are: not waited for.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from peer.base import PeerBusy, PeerError, SubmitResult
from peer.sync_http import FetchedOperations, HttpSyncClient

JITTER = 0.25  # a wait is Retry-After stretched by up to this share
T = TypeVar("T")


class PeerStayedBusy(PeerError):
    """The peer was still busy after the waits a run allows."""


class BusyCount(Protocol):
    """Where a run counts its busy answers (its report)."""

    busy: int
    busy_waited_s: float


class PatientClient:
    def __init__(
        self,
        client: HttpSyncClient,
        count: BusyCount,
        *,
        waits: int,
        wait_max_s: float,
        deadline_s: float,
    ) -> None:
        self._client, self._count = client, count
        self._waits, self._wait_max_s = waits, wait_max_s
        self._deadline = time.monotonic() + deadline_s

    async def negentropy(
        self, peer_url: str, message: bytes, *, since: int | None, until: int | None,
        frame_limit: int, scope: str | None,
    ) -> bytes:  # fmt: skip
        return await self._waiting(
            lambda: self._client.negentropy(
                peer_url, message, since=since, until=until, frame_limit=frame_limit, scope=scope
            )
        )

    async def fetch_operations(self, peer_url: str, cids: Sequence[str]) -> FetchedOperations:
        return await self._waiting(lambda: self._client.fetch_operations(peer_url, cids))

    async def submit_operations(
        self, peer_url: str, tokens: Sequence[str], headers: Mapping[str, str] | None
    ) -> list[SubmitResult]:
        return await self._client.submit_operations(peer_url, tokens, headers)

    async def _waiting(self, call: Callable[[], Awaitable[T]]) -> T:
        count = self._count
        while True:
            try:
                return await call()
            except PeerBusy as exc:
                count.busy += 1
                wait = min(exc.retry_after_s, self._wait_max_s) * (1 + JITTER * random.random())
                if count.busy > self._waits or time.monotonic() + wait > self._deadline:
                    raise PeerStayedBusy(exc.peer_url, _stayed(count, exc)) from exc
                count.busy_waited_s += wait
                await asyncio.sleep(wait)


def _stayed(count: BusyCount, exc: PeerBusy) -> str:
    return (
        f"peer busy: answered HTTP {exc.status} with Retry-After {count.busy} time(s)"
        f" in one run (last {exc.retry_after_s}s, {count.busy_waited_s:.1f}s waited in all):"
        " no room for us there now, try again later"
    )
