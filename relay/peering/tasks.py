"""Owned background tasks: cancelled together, each awaited to its end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_all(tasks: Iterable[asyncio.Task[object]], *, quiet: bool = False) -> None:
    """Cancel every task, then await each; ``quiet`` also swallows the
    error a task may have ended with (it was logged where it happened)."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    ignored: tuple[type[BaseException], ...] = (
        (asyncio.CancelledError, Exception) if quiet else (asyncio.CancelledError,)
    )
    for task in pending:
        with contextlib.suppress(*ignored):
            await task
