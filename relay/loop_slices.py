"""Long work on the event loop in slices: a pause for the loop's other work
once ``SLICE_S`` has passed since the last one.

For work whose steps need not suspend (a memory store's reads, an SSE send
the socket takes at once, decoding a page of tokens): without a pause, one
bootstrap or one scope's closure held the loop, and every other request of
the relay, for all of it. Importable from every layer (it knows nothing of
the relay).
"""

from __future__ import annotations

import asyncio
import time

SLICE_S = 0.005  # work runs at most about this long between two turns of the loop


class Slices:
    """Pauses for the loop's other work, each once ``SLICE_S`` has passed
    since the last: a clock read per step, a pause only when one is due (a
    store whose reads suspend anyway pauses a little more often)."""

    def __init__(self) -> None:
        self._due = time.monotonic() + SLICE_S

    async def pause_when_due(self) -> None:
        if time.monotonic() >= self._due:
            await asyncio.sleep(0)
            self._due = time.monotonic() + SLICE_S
