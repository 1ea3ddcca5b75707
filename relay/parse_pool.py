"""Parsing large untrusted request bodies off the event loop, in a child process.

Why a process and not a thread: orjson and the ``json`` C scanner hold the
GIL for the whole parse, so a worker thread does not free the event loop.
Measured on a 4 MiB ``POST /operations`` body of 1.4 million empty objects
(answered 400): the loop stalled ~130 ms parsing it inline and still ~90 ms
parsing it on a worker thread; meanwhile every other request and every live
feed subscriber waits. A child process parses it while the loop serves on:
the body goes over a pipe and only the small result, or the exception the
parse function raised, comes back.

Which bodies go: a JSON parse costs by its elements far more than by its
bytes. At the 4 MiB cap, 1.4 million empty objects took 133 ms, while one
long string, escapes, deep nesting, a huge number or whitespace took 4-15
ms; and every element after the first of a container follows a comma. So a
body goes to the child when it is over ``OFF_LOOP_BYTES`` (below that the
costliest shape takes ~0.7 ms, about a round trip to the child) *and* holds
more than ``OFF_LOOP_COMMAS`` commas. An ordinary batch (100 tokens, ~75
KiB; a JWS compact string holds no comma) parses inline: ingestion pays no
round trip.

A caller may count values its own way and run a cheap body its own way:
an uploaded content-plane document (up to 16 MiB) also counts its opening
brackets (its depth check scans them), and one that is cheap to check, or
whose child is gone, is checked on a worker thread (``relay.http.content``).

The child is ``python -m relay.parse_child``, a plain subprocess rather than
a ``multiprocessing`` one: that would re-import the embedding program's
``__main__`` in the child (a script without a main guard would start a
second relay there). One child per relay process, started on the first
large body, one body at a time (operations bodies and documents share it),
stopped with the relay. The answer never depends on the child: one that
cannot start or that died is replaced on the next large body, and the body
it was given is parsed inline (or by the caller's fallback). The parse
function and what it raises must pickle (a module-level function or a
``functools.partial`` of one; exceptions that rebuild from their
``__reduce__``).

How many bodies wait is bounded: each holds its request's body (up to the
body cap, 4 MiB, or a document's, 16 MiB) while it waits, and a flood of
costly bodies would otherwise queue without end, in memory, for one child
that takes ~0.1 s per 4 MiB. A pool admits at most ``max_waiting`` bodies
at once (the one in the child included: ``WaitingLine``); one more is
refused at once with ``ParseBusy``, which the HTTP layer answers 503 with
``Retry-After``. An ordinary body never waits (it is parsed inline), so it
is never refused. Not bounded here: how long an admitted body waits (at
most ``max_waiting`` parses).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import struct
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeAlias, TypeVar

from relay.config import DEFAULT_PARSE_QUEUE

__all__ = [
    "DEFAULT_PARSE_QUEUE", "OFF_LOOP_BYTES", "OFF_LOOP_COMMAS", "PARSE_BUSY_RETRY_AFTER_S",
    "Fallback", "ParseBusy", "ParsePool", "WaitingLine", "count_commas", "read_frame",
    "write_frame",
]  # fmt: skip

OFF_LOOP_BYTES = 64 * 1024
OFF_LOOP_COMMAS = 1024  # ten times a full batch's (99)
PARSE_BUSY_RETRY_AFTER_S = 1  # a full line drains in about that
FRAME_HEAD = struct.Struct(">Q")  # each message: its length, then its pickle
T = TypeVar("T")
# how the caller runs ``function(body)`` itself when the child is gone
Fallback: TypeAlias = Callable[[Callable[[bytes], T], bytes], Awaitable[T]]
log = logging.getLogger("dfos_relay.parse_pool")


def write_frame(stream: Any, value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(FRAME_HEAD.pack(len(data)))
    stream.write(data)  # not joined to its head: a body is up to 16 MiB, not copied twice


def count_commas(body: bytes) -> int:
    """The values of a JSON body, roughly: each but a container's first follows a comma."""
    return body.count(b",")


def read_frame(read_exactly: Callable[[int], bytes]) -> object:
    (size,) = FRAME_HEAD.unpack(read_exactly(FRAME_HEAD.size))
    return pickle.loads(read_exactly(size))


def _child_environment() -> dict[str, str]:
    # the child imports the relay (and the parse function's module) from
    # where this process does, even when an embedder extended sys.path
    path = os.pathsep.join(entry for entry in sys.path if entry)
    return {**os.environ, "PYTHONPATH": path}


async def _call_here(function: Callable[[bytes], T], body: bytes) -> T:
    return function(body)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class ParseBusy(Exception):
    """More bodies than the bound wait already: retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: int = PARSE_BUSY_RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class WaitingLine:
    """Counts bodies waiting for (or in) one scarce worker; refuses one beyond ``bound``.

    Entering never waits: a caller over the bound gets ``ParseBusy`` before it
    queues, so its body is freed at once."""

    def __init__(self, bound: int, what: str) -> None:
        if bound < 1:
            raise ValueError("a waiting line admits at least one body")
        self.bound = bound
        self.what = what  # named in the refusal
        self.count = 0

    def enter(self) -> None:
        if self.count >= self.bound:
            raise ParseBusy(f"too many {self.what} waiting (at most {self.bound}); retry later")
        self.count += 1

    def leave(self) -> None:
        self.count -= 1

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.leave()


class _ChildGone(Exception):
    """The child could not be started, or ended before it answered."""


class ParsePool:
    """``await parse(function, body)``: inline for a small or a cheap body, else in the child.

    A caller with its own measure of cost, or its own way of running a cheap
    body (a worker thread), asks ``is_costly(body, count_values)`` and calls
    ``in_child`` with its fallback (``relay.http.content`` does).
    """

    def __init__(
        self,
        off_loop_bytes: int = OFF_LOOP_BYTES,
        off_loop_commas: int = OFF_LOOP_COMMAS,
        max_waiting: int = DEFAULT_PARSE_QUEUE,
    ) -> None:
        self.off_loop_bytes = off_loop_bytes
        self.off_loop_commas = off_loop_commas
        self.waiting = WaitingLine(max_waiting, "large bodies")
        self._child: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Lock()  # one body at a time on the pipe

    def is_costly(self, body: bytes, count_values: Callable[[bytes], int] = count_commas) -> bool:
        """``body`` is over ``off_loop_bytes`` and holds more than
        ``off_loop_commas`` values, as ``count_values`` counts them."""
        return len(body) > self.off_loop_bytes and count_values(body) > self.off_loop_commas

    async def parse(self, function: Callable[[bytes], T], body: bytes) -> T:
        if not self.is_costly(body):
            return function(body)
        return await self.in_child(function, body, fallback=_call_here)

    async def in_child(
        self, function: Callable[[bytes], T], body: bytes, fallback: Fallback[T]
    ) -> T:
        """``function(body)`` in the child: its value, or what it raised;
        ``await fallback(function, body)`` when the child is gone.
        ``ParseBusy`` when ``max_waiting`` bodies are already admitted."""
        self.waiting.enter()
        # shielded: a request cancelled mid-exchange must not leave half an
        # answer in the pipe for the next one
        exchange = asyncio.ensure_future(self._exchange(function, body))
        # the exchange holds the body until it is done, even when abandoned
        exchange.add_done_callback(lambda _: self.waiting.leave())
        exchange.add_done_callback(_retrieve)  # an abandoned one's error is not "never retrieved"
        try:
            status, value = await asyncio.shield(exchange)
        except _ChildGone:
            return await fallback(function, body)
        if status == "raised":
            raise value
        return value  # type: ignore[no-any-return]

    async def _exchange(self, function: Callable[[bytes], T], body: bytes) -> tuple[str, Any]:
        async with self._turn:
            child = await self._started()
            assert child.stdin is not None and child.stdout is not None
            try:
                write_frame(child.stdin, (function, body))
                await child.stdin.drain()
                head = await child.stdout.readexactly(FRAME_HEAD.size)
                (size,) = FRAME_HEAD.unpack(head)
                answer = pickle.loads(await child.stdout.readexactly(size))
            except (OSError, asyncio.IncompleteReadError) as exc:
                log.warning("the parse child ended (%s); parsing inline", exc)
                await self._stop()
                raise _ChildGone from exc
            return answer  # type: ignore[no-any-return]

    async def _started(self) -> asyncio.subprocess.Process:
        if self._child is None or self._child.returncode is not None:
            try:
                self._child = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "relay.parse_child",
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    env=_child_environment(),
                )  # fmt: skip
            except OSError as exc:
                log.warning("the parse child could not start (%s); parsing inline", exc)
                raise _ChildGone from exc
        return self._child

    async def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.stdin is not None:
            child.stdin.close()  # the child ends at end of input
        try:
            await asyncio.wait_for(child.wait(), 2)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()

    async def close(self) -> None:
        """Stop the child (if one was started); a later large body starts another."""
        async with self._turn:
            await self._stop()
