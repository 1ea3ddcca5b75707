"""A lean ASGI response for one long-lived SSE stream of pre-framed bytes.

Events are framed by sse-starlette's ``ServerSentEvent`` (the feed frames
each op once and shares the bytes); this only streams them. It replaces
sse-starlette's ``EventSourceResponse`` on the feed's hot path, where that
response's per-send anyio cancel scope and its task group of three or four
tasks per stream cost more than the writes themselves with hundreds of
subscribers. Here each send is bounded by ``asyncio.timeout`` and one task
per stream watches for the client leaving.

Invariants: a send that waits past ``send_timeout_s`` ends the stream and
calls ``on_slow``; a client that leaves ends it too (the streaming task is
cancelled by the watcher); either way the chunk iterator is closed, so its
cleanup runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse

# no-store: a live stream is never cached; X-Accel-Buffering: proxies must not buffer it
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class SseStream(StreamingResponse):
    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        send_timeout_s: float,
        on_slow: Callable[[], None],
    ) -> None:
        super().__init__(chunks, headers=HEADERS, media_type="text/event-stream")
        self._chunks = chunks
        self._send_timeout_s = send_timeout_s
        self._on_slow = on_slow

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        if scope.get("method") == "HEAD":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        streaming = asyncio.current_task()
        assert streaming is not None
        finished = False

        def client_left(_: object) -> None:
            if not finished:
                streaming.cancel()

        watcher = asyncio.create_task(_until_disconnect(receive))
        watcher.add_done_callback(client_left)
        try:
            async for chunk in self._chunks:
                async with asyncio.timeout(self._send_timeout_s):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            self._on_slow()  # the connection closes without the final chunk: a cut
        except asyncio.CancelledError:
            if not watcher.done():
                raise  # cancelled from outside (the server stops)
            streaming.uncancel()  # the client left: a normal end
        finally:
            finished = True
            if not watcher.done():
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await _close(self._chunks)


async def _until_disconnect(receive: Any) -> None:
    with contextlib.suppress(Exception):  # a receive that fails: the client is gone too
        while (await receive())["type"] != "http.disconnect":
            pass


async def _close(chunks: AsyncIterator[bytes]) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()
