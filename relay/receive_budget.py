"""The bytes of request bodies being received at once, relay-wide, bounded.

A body is held in memory while it arrives (up to the body cap, 4 MiB, or a
document's, 16 MiB), and the bodies arriving at once were bounded only by
the connections: 64 slow uploads of 16 MiB held ~1 GiB (``bench.upload_memory``).
Once received, a body is bounded by the lines it waits in (``relay.parse_pool``),
so the budget covers the receiving only.

A body holds the bytes it has received, taken chunk by chunk as each
arrives; a chunk that would take the bytes held over the budget raises
``ReceiveBusy``, which the HTTP layer answers 503 with ``Retry-After``. A
body whose ``Content-Length`` does not fit beside what is held now is
refused before any of it is read. Holding what was received, not what was
declared, is what keeps the budget from being a cheap lock: a client that
declares large bodies and trickles them in holds only what it sent. Nor
can a body hold what it sent for long by sending it fast and then stalling:
its deadline is never more than the body grace ahead
(``relay.http.params``), so a body holds its bytes no longer than one sent
steadily at the minimum rate would (``body_min_rate``; before that bound, a
4 MiB body sent fast banked over an hour at 1 KiB/s, and sixteen of them
held the default budget, every other body over 64 KiB answered 503).

Two kinds of body are never refused: one alone in the budget (a budget
below the body caps slows large bodies down rather than refusing them for
ever), and one of at most ``SMALL_BODY_BYTES`` (the usual batch of
operations): bodies that large are already what hypercorn buffers for each
connection ahead of the app, so the budget would bound nothing more, and
uploads filling it must not stop writes. A reservation is given back when
it is left, on every exit: complete, refused, disconnected, timed out or
cancelled.

Not bounded here: what hypercorn buffers per connection ahead of the app
(``max_app_queue_size`` messages of up to 64 KiB), nor a body after it is
received.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from relay.config import DEFAULT_RECEIVE_BUDGET_BYTES

__all__ = [
    "DEFAULT_RECEIVE_BUDGET_BYTES", "RECEIVE_BUSY_RETRY_AFTER_S", "SMALL_BODY_BYTES",
    "ReceiveBudget", "ReceiveBusy", "Reservation",
]  # fmt: skip

RECEIVE_BUSY_RETRY_AFTER_S = 1  # bodies arriving at speed are in within about that
SMALL_BODY_BYTES = 64 * 1024  # never refused (see the module)


class ReceiveBusy(Exception):
    """The budget is taken by bodies being received: retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: int = RECEIVE_BUSY_RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Reservation:
    """The bytes one request body holds in its ``ReceiveBudget``."""

    def __init__(self, budget: ReceiveBudget) -> None:
        self._budget = budget
        self.size = 0

    def admit(self, declared: int) -> None:
        """Raise ``ReceiveBusy`` if a body of ``declared`` bytes would not fit
        beside the bytes held now (holding nothing: it holds what arrives)."""
        self._check(declared)

    def take(self, size: int) -> None:
        """Hold ``size`` more bytes, or raise ``ReceiveBusy`` (holding nothing more)."""
        self._check(self.size + size)
        self._budget.held += size
        self.size += size

    def _check(self, whole: int) -> None:
        """Whether this body may come to ``whole`` bytes beside the others."""
        budget = self._budget
        others = budget.held - self.size
        if whole > SMALL_BODY_BYTES and others and others + whole > budget.limit:
            raise ReceiveBusy(
                f"too many request bodies being received (at most {budget.limit} bytes"
                " at once); retry later"
            )

    def give_back(self) -> None:
        self._budget.held -= self.size
        self.size = 0


class ReceiveBudget:
    """At most ``limit`` bytes of bodies being received at once (see the module).

    Used from the event loop only: taking and giving back never wait."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a receive budget holds at least one byte")
        self.limit = limit
        self.held = 0

    @contextlib.contextmanager
    def reserving(self) -> Iterator[Reservation]:
        """A reservation for one body, given back however the block is left."""
        reservation = Reservation(self)
        try:
            yield reservation
        finally:
            reservation.give_back()
