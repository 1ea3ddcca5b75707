"""The bytes of request bodies being received at once, relay-wide, bounded.

A body is held in memory while it arrives (up to the body cap, 4 MiB, or a
document's, 16 MiB), and the bodies arriving at once were bounded only by
the connections: 64 slow uploads of 16 MiB held ~1 GiB (``bench.upload_memory``).
Once received, a body is bounded by the lines it waits in (``relay.parse_pool``),
so the budget covers the receiving only.

A request reserves its body before reading it: by its ``Content-Length``
when it has one (the server refuses more than that), else chunk by chunk
as each arrives. A reservation that would take the bytes held over the
budget raises ``ReceiveBusy``, which the HTTP layer answers 503 with
``Retry-After``; a body declared too large is refused before any of it is
read. A body alone in the budget is admitted whatever its size, so a
budget below the body caps slows large bodies down rather than refusing
them forever. A reservation is given back when it is left, on every exit:
complete, refused, disconnected, timed out or cancelled.

Not bounded here: what hypercorn buffers per connection ahead of the app
(``max_app_queue_size`` messages of up to 64 KiB), nor a body after it is
received.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from relay.config import DEFAULT_RECEIVE_BUDGET_BYTES

__all__ = [
    "DEFAULT_RECEIVE_BUDGET_BYTES", "RECEIVE_BUSY_RETRY_AFTER_S", "ReceiveBudget",
    "ReceiveBusy", "Reservation",
]  # fmt: skip

RECEIVE_BUSY_RETRY_AFTER_S = 1  # bodies arriving at speed are in within about that


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

    def take(self, size: int) -> None:
        """Hold ``size`` more bytes, or raise ``ReceiveBusy`` (holding nothing more)."""
        budget = self._budget
        others = budget.held - self.size
        if others and budget.held + size > budget.limit:
            raise ReceiveBusy(
                f"too many request bodies being received (at most {budget.limit} bytes"
                " at once); retry later"
            )
        budget.held += size
        self.size += size

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
