"""A lean ASGI response for one long-lived SSE stream of pre-framed bytes.

Events are framed by sse-starlette's ``ServerSentEvent`` (the feed frames
each op once and shares the bytes); this only streams them. It replaces
sse-starlette's ``EventSourceResponse`` on the feed's hot path, where that
response's per-send anyio cancel scope and its task group of three or four
tasks per stream cost more than the writes themselves with hundreds of
subscribers. Here one task per stream watches for the client leaving, and
one watchdog per event loop cuts the streams whose send has waited too long:
a send only notes when it started, instead of arming and cancelling a timer
(a heap push and a cancelled handle, per write and per subscriber).

Invariants: a send that waits past ``send_timeout_s`` (give or take the
watchdog's tick, a quarter of the timeout, at most 1 s) ends the stream and
calls ``on_slow``, whose bytes (an error event naming where to resume) are
queued as the stream's last, behind what the consumer has not read yet
(waited for ``FINAL_SEND_S`` at most); a client that leaves ends it too (the
streaming task is cancelled by the watcher); either way the chunk iterator is
closed, so its cleanup runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse

MAX_TICK_S = 1.0  # the watchdog checks at least this often (a quarter of the shortest timeout)
FINAL_SEND_S = 1.0  # a stalled stream's last event: queued, then waited for this long
# no-store: a live stream is never cached; X-Accel-Buffering: proxies must not buffer it
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class SseStream(StreamingResponse):
    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        send_timeout_s: float,
        on_slow: Callable[[], bytes],
    ) -> None:
        super().__init__(chunks, headers=HEADERS, media_type="text/event-stream")
        self._chunks = chunks
        self.send_timeout_s = send_timeout_s
        self._on_slow = on_slow
        self._sending_since: float | None = None  # loop time the current send began
        self._streaming: asyncio.Task[Any] | None = None
        self._stalled = False

    def check(self, now: float) -> None:
        """The watchdog's tick: cut the stream if its send waits too long."""
        since = self._sending_since
        if since is None or self._stalled or now - since <= self.send_timeout_s:
            return
        self._stalled = True
        if self._streaming is not None:
            self._streaming.cancel()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        if scope.get("method") == "HEAD":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        streaming = self._streaming = asyncio.current_task()
        assert streaming is not None
        loop = asyncio.get_running_loop()
        finished = False

        def client_left(_: object) -> None:
            if not finished:
                streaming.cancel()

        watcher = asyncio.create_task(_until_disconnect(receive))
        watcher.add_done_callback(client_left)
        watchdog = _watchdog(loop)
        watchdog.add(self)
        try:
            async for chunk in self._chunks:
                self._sending_since = loop.time()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self._sending_since = None
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if self._stalled:
                streaming.uncancel()
                last = {"type": "http.response.body", "body": self._on_slow(), "more_body": False}
                try:
                    await asyncio.wait_for(send(last), FINAL_SEND_S)
                except asyncio.CancelledError:
                    if not watcher.done():
                        raise  # the server stops
                    streaming.uncancel()  # the client left meanwhile: the end anyway
                except Exception:
                    pass  # still unwritable: it closes as a cut
            elif not watcher.done():
                raise  # cancelled from outside (the server stops)
            else:
                streaming.uncancel()  # the client left: a normal end
        finally:
            finished = True
            watchdog.discard(self)
            if not watcher.done():
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await _close(self._chunks)


class _Watchdog:
    """Ticks while any stream of its loop is open; each tick checks them all."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._streams: set[SseStream] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, stream: SseStream) -> None:
        self._streams.add(stream)
        if self._task is None:
            self._task = self._loop.create_task(self._run(), name="SSE send watchdog")

    def discard(self, stream: SseStream) -> None:
        self._streams.discard(stream)

    async def _run(self) -> None:
        while True:
            shortest = min((s.send_timeout_s for s in self._streams), default=1.0)
            await asyncio.sleep(min(MAX_TICK_S, shortest / 4))
            now = self._loop.time()
            for stream in list(self._streams):
                stream.check(now)
            if not self._streams:
                self._task = None  # no await since the check: a new stream restarts it
                return


_WATCHDOGS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = (
    weakref.WeakKeyDictionary()
)


def _watchdog(loop: asyncio.AbstractEventLoop) -> _Watchdog:
    found = _WATCHDOGS.get(loop)
    if found is None:
        found = _WATCHDOGS[loop] = _Watchdog(loop)
    return found


async def _until_disconnect(receive: Any) -> None:
    with contextlib.suppress(Exception):  # a receive that fails: the client is gone too
        while (await receive())["type"] != "http.disconnect":
            pass


async def _close(chunks: AsyncIterator[bytes]) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()
