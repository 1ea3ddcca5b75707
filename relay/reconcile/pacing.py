"""Negentropy work on the event loop in short steps.

A message of many ranges is seconds of CPU (1 MiB holds ~350,000 skip
ranges); run at once it would stall every other request of the relay.
Between steps the loop runs other work, commits included, so the storage
is viewed afresh before each step goes on (the reconciler finds its
positions again from the bounds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from relay.protocol.negentropy import Negentropy, Steps, Storage

T = TypeVar("T")


async def run_paced(steps: Steps[T], negentropy: Negentropy, view: Callable[[], Storage]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        await asyncio.sleep(0)
        negentropy.storage = view()
