"""What hypercorn holds for one WebSocket client, bounded by the relay's
message limit.

An ASGI app sees a WebSocket message only once the server has assembled
it, so what a client's unfinished or oversized message costs is the
server's to bound. Hypercorn 0.18 (the pinned one) does not, in three ways:

- it buffers up to ``websocket_max_message_size`` (16 MiB by default) per
  socket, held for as long as a fragmented message stays unfinished;
- past that size it sends close 1009 but keeps appending whatever the
  client goes on sending to the same buffer, without end;
- it inflates a permessage-deflate frame whole, before any size check: a
  100 KB frame of compressed zeros is 100 MB of memory.

Nor does it tell the app when it sent that 1009 itself: the app's
subscriptions on the socket ran on (and held their subscriber slots) until
the client answered the close or hung up, which a hostile one never does.
And it pings (``websocket_ping_interval``) without ever checking that a
pong comes back.

``bound_hypercorn_websockets()`` swaps in a buffer that refuses to grow
past the relay's message limit and an inflater that never produces more
than that limit from one read; either way the client gets close 1009
(message too big). Its WebSocket stream then tells the app at once
(``websocket.disconnect``, code 1009) and closes the connection when the
client answers the close, or ``CLOSE_LINGER_S`` later. The same stream
notes when the client was last heard from (any bytes: a pong, a message)
and, where hypercorn pings, says so in the scope (``HEARD_EXTENSION``):
``changes_ws`` closes a socket that answered none of several pings. All are
small subclasses of hypercorn's and wsproto's own classes, installed where
``hypercorn.protocol`` looks them up (``tests/feed/
test_a_hostile_websocket_client_is_bounded.py`` and ``tests/feed/
test_a_websocket_that_answers_no_ping_is_closed.py`` fail if a hypercorn
upgrade moves them). Not bounded here: a client that never reads what
hypercorn writes (its writes wait without a deadline; bounded in memory by
its write buffer; ``changes_ws`` closes it for its send timeout or its
unanswered pings).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from typing import Any

from hypercorn.protocol import h2, h11, ws_stream
from hypercorn.protocol.events import Data, StreamClosed
from wsproto.connection import ConnectionState
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import CloseReason

from .changes_ws import HEARD_EXTENSION, MAX_WS_MESSAGE_BYTES

# After its own close 1009, how long the connection waits for the client's
# answering close (reading and dropping what it still sends) before it hangs
# up anyway, as RFC 6455 has it wait: hanging up at once resets the
# connection under what the client is still sending, and some clients'
# stacks then drop the 1009 unread (Linux keeps it readable).
CLOSE_LINGER_S = 10.0


class BoundedBuffer(ws_stream.WebsocketBuffer):
    """One message being assembled, never past the relay's limit."""

    def __init__(self, max_length: int) -> None:
        super().__init__(min(max_length, MAX_WS_MESSAGE_BYTES))

    def extend(self, event: Any) -> None:
        # refuse before appending: past the limit nothing more is kept
        if self.length + len(event.data) > self.max_length:
            raise ws_stream.FrameTooLargeError()
        super().extend(event)


class BoundedDeflate(PerMessageDeflate):
    """permessage-deflate that inflates at most the limit (+1) from one read."""

    overflowed = False

    def frame_inbound_payload_data(self, proto: Any, data: bytes) -> bytes | CloseReason:
        if not self._inbound_compressed or not self._inbound_is_compressible:
            return data
        if self.overflowed:  # the message was refused: inflate none of the rest
            return CloseReason.MESSAGE_TOO_BIG
        assert self._decompressor is not None  # set up by the frame's header
        try:
            out = self._decompressor.decompress(bytes(data), MAX_WS_MESSAGE_BYTES + 1)
        except zlib.error:
            return CloseReason.INVALID_FRAME_PAYLOAD_DATA
        # more than the limit from one read: the buffer refuses it (close 1009)
        self.overflowed = bool(self._decompressor.unconsumed_tail)
        return out


class WatchedStream(ws_stream.WSStream):
    """hypercorn's WebSocket stream, which also knows when the client was
    last heard from, and tells the app when it refused a message itself."""

    heard_at = 0.0  # time.monotonic() of the last bytes from the client
    refused = False  # this stream sent close 1009, not the app
    gone: asyncio.Event | None = None  # set once the stream is closed

    async def handle(self, event: Any) -> None:
        if isinstance(event, Data):
            self.heard_at = time.monotonic()
        elif isinstance(event, StreamClosed) and self.gone is not None:
            self.gone.set()
        await super().handle(event)

    async def _accept(self, message: Any) -> None:
        self.heard_at = time.monotonic()
        interval = self.config.websocket_ping_interval
        if interval is not None:  # unpinged, a quiet client is no sign of anything
            heard = {"ping_interval_s": float(interval), "quiet_s": self._quiet_s}
            self.scope["extensions"][HEARD_EXTENSION] = heard
        await super()._accept(message)

    def _quiet_s(self) -> float:
        return time.monotonic() - self.heard_at

    async def _handle_events(self) -> None:
        await super()._handle_events()
        # closing while the app has not: hypercorn's own 1009 (the only close it starts)
        if self.refused or self.state is not ws_stream.ASGIWebsocketState.CONNECTED:
            return
        if self.connection.state is ConnectionState.LOCAL_CLOSING:
            self.refused = True
            self.gone = asyncio.Event()
            self.task_group.spawn(self._linger)
            code = CloseReason.MESSAGE_TOO_BIG.value
            assert self.app_put is not None  # accepted: the app runs
            await self.app_put({"type": "websocket.disconnect", "code": code})

    async def app_send(self, message: Any) -> None:
        if message is None and self.refused:
            return  # the app is done: the connection closes as _linger says
        await super().app_send(message)

    async def _linger(self) -> None:
        """Until the client answers the 1009 (or hangs up), at most ``CLOSE_LINGER_S``."""
        assert self.gone is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_LINGER_S):
                await self.gone.wait()
        if not self.closed:
            await self.send(StreamClosed(stream_id=self.stream_id))


def bound_hypercorn_websockets() -> None:
    """Install them where hypercorn looks them up (idempotent)."""
    ws_stream.WebsocketBuffer = BoundedBuffer  # type: ignore[misc]
    ws_stream.PerMessageDeflate = BoundedDeflate  # type: ignore[misc]
    h11.WSStream = WatchedStream  # type: ignore[misc]
    h2.WSStream = WatchedStream  # type: ignore[misc]
