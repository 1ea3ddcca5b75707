"""Negentropy work on the event loop in short steps.

A message of many ranges is seconds of CPU (1 MiB holds ~350,000 skip
ranges); run at once it would stall every other request of the relay.
Between steps the loop runs other work, commits included, so the storage
is viewed afresh before each step goes on (the reconciler finds its
positions again from the bounds).

Paced work still delays every other request: each pause of the loop runs
one step of every round under way, so a request waits a step per round
for each of its own awaits. The server bounds how many rounds pause at
once (``pausing``: entered at the first pause, refusing when full).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar

from relay.protocol.negentropy import Negentropy, Steps, Storage

T = TypeVar("T")


class Pauses:
    """``await pause()`` between steps of work of one's own (a scope's set
    read a page at a time): the loop runs other work, and ``pausing`` is
    entered at the first pause and held until ``held`` is closed."""

    def __init__(
        self,
        held: contextlib.ExitStack,
        pausing: contextlib.AbstractContextManager[None] | None = None,
    ) -> None:
        self._held = held
        self._pausing = pausing

    async def __call__(self) -> None:
        if self._pausing is not None:
            self._held.enter_context(self._pausing)
            self._pausing = None
        await asyncio.sleep(0)


async def run_paced(
    steps: Steps[T],
    negentropy: Negentropy,
    view: Callable[[], Storage],
    pausing: contextlib.AbstractContextManager[None] | None = None,
) -> T:
    """``steps`` run to their end; ``pausing`` is entered before the first
    pause and left at the end (work done in one step never enters it)."""
    with contextlib.ExitStack() as held:
        pause = Pauses(held, pausing)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                result: T = done.value
                return result
            await pause()
            negentropy.storage = view()
