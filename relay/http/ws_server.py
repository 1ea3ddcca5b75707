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

``bound_hypercorn_websockets()`` swaps in a buffer that refuses to grow
past the relay's message limit and an inflater that never produces more
than that limit from one read; either way the client gets close 1009
(message too big). Both are small subclasses of hypercorn's and wsproto's
own classes, installed where ``hypercorn.protocol.ws_stream`` looks them
up (``tests/feed/test_a_hostile_websocket_client_is_bounded.py`` fails if
a hypercorn upgrade moves them). Not bounded here: how long a client may
take (``changes_ws`` closes a socket that holds no subscription after its
idle timeout), and a client that never reads what hypercorn writes (its
writes wait without a deadline; bounded in memory by its write buffer).
"""

from __future__ import annotations

import zlib
from typing import Any

from hypercorn.protocol import ws_stream
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import CloseReason

from .changes_ws import MAX_WS_MESSAGE_BYTES


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


def bound_hypercorn_websockets() -> None:
    """Install both where hypercorn looks them up (idempotent)."""
    ws_stream.WebsocketBuffer = BoundedBuffer  # type: ignore[misc]
    ws_stream.PerMessageDeflate = BoundedDeflate  # type: ignore[misc]
