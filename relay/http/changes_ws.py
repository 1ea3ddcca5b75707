"""``GET /changes`` upgraded to a WebSocket: the changes feed in the draft's
message family (additive to v0.7.1).

The client sends ``["CHANGES", subId, filter]`` and ``["CLOSE", subId]``;
the relay answers ``["CHANGES", subId, "STATUS" | "SNAPSHOT" | "EVENT" |
"EOSE" | "ERR", ...]``. Several subscriptions share one socket, and their
sends are serialized, each bounded by the send timeout.

A consumer that stays unwritable past the send timeout is closed: every
open subscription gets an ERR ``{error, code: 4008, token, seq}`` carrying
its last delivered token (the last event whose send completed), then the
socket closes with code 4008 and the token of the subscription that
stalled. Both are queued behind what the consumer has not read yet, so it
sees them once it reads again. The event whose send was cut may still
arrive before the ERR: resuming from the ERR token loses nothing, and a
client that also tracks the seqs it received skips that one repeat.

A client that sends nothing, not even a pong, for ``UNANSWERED_PINGS`` of
the server's ping intervals has stopped reading (or is gone without a
word) and is closed the same way: an ERR 4008 with its last delivered token
for each open subscription, then close 4008 (the token in the reason when
one subscription was open), which frees its subscriber slots. The server
says when it last heard from the client (``HEARD_EXTENSION``, set by
``relay.http.ws_server``); where it does not ping, nothing is checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from relay.feed import (
    Eose,
    Events,
    FeedError,
    FeedMessage,
    FeedRequestError,
    Snapshot,
    Status,
    Subscription,
    filter_from_json,
)
from relay.protocol.untrusted import json_value

from .changes import bootstrap_url, count_error
from .context import relay_of

log = logging.getLogger("dfos_relay.feed")

MAX_WS_MESSAGE_BYTES = 64 * 1024
MAX_WS_SUBSCRIPTIONS = 16
MAX_SUB_ID_CHARS = 64
# A socket with no subscription open this long is closed (1000): an idle
# socket is not counted by the subscriber cap, so this bounds what it holds
IDLE_TIMEOUT_S = 60.0
SLOW_CONSUMER_CLOSE = 4008
# Closed once the client has sent nothing for this many ping intervals: a
# live client answers each ping, so even one lost or late pong is no cause
UNANSWERED_PINGS = 3
# A scope extension: {"ping_interval_s": float, "quiet_s": () -> seconds
# since the client last sent anything}, where the server pings
HEARD_EXTENSION = "dfos.websocket.heard"
CLOSE_GRACE_S = 10.0  # the whole closing sequence (ERR frames, close frame)
FINAL_FRAME_WAIT_S = 1.0  # one closing frame: queued at once, then waits for room


class _Socket:
    """One client socket: its subscriptions, and sends bounded in time."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.relay = relay_of(ws)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.subs: dict[str, Subscription] = {}  # the open ones, for their closing ERR
        self.send_lock = asyncio.Lock()
        self.closed = False
        self.done = asyncio.Event()  # set when this socket must close
        self.slow = False  # a send timed out, whichever frame it was
        self.stalled: tuple[str, Subscription] | None = None  # the subscription it was for
        self.idle = False  # closed for holding no subscription
        self.unanswered = 0.0  # closed for sending nothing this many seconds
        self.busy_at = asyncio.get_running_loop().time()  # when the last subscription ended

    async def send(self, text: str, stalled: tuple[str, Subscription] | None = None) -> None:
        """Send one frame; past the send timeout, mark the socket for closing
        (``stalled`` names the subscription whose send it was)."""
        async with self.send_lock:
            if self.closed:
                raise WebSocketDisconnect()
            try:
                async with asyncio.timeout(self.relay.feed.config.send_timeout_s):
                    await self.ws.send_text(text)
            except TimeoutError:
                self.relay.metrics.feed_slow_closed.inc()
                self.closed = self.slow = True
                self.stalled = stalled
                self.done.set()
                raise WebSocketDisconnect(SLOW_CONSUMER_CLOSE) from None

    async def send_frame(
        self, frame: list[Any], stalled: tuple[str, Subscription] | None = None
    ) -> None:
        await self.send(json.dumps(frame), stalled)

    async def close(self, open_subs: dict[str, Subscription]) -> None:
        """The closing sequence, after what is already buffered; bounded."""
        self.closed = True
        code, reason, error = 1000, "bye", ""  # error: each open subscription gets an ERR
        if self.idle:
            reason = f"no subscription open for {IDLE_TIMEOUT_S:g} s"
        if self.slow:  # whichever frame stalled (an event, a snapshot, a NOTICE)
            code, reason = SLOW_CONSUMER_CLOSE, "slow consumer"
            error = "slow consumer: the socket stayed unwritable; resume from token"
            if self.stalled is not None:
                stalled_id, stalled = self.stalled
                reason = f"slow consumer; resume from {stalled.token.compact()}"
                open_subs = {stalled_id: stalled, **open_subs}
        elif self.unanswered:
            code, reason = SLOW_CONSUMER_CLOSE, f"no pong for {self.unanswered:g} s"
            error = f"{reason}: the client stopped reading or is gone; resume from token"
            if len(open_subs) == 1:
                reason += f"; resume from {next(iter(open_subs.values())).token.compact()}"
        frames = []
        for sub_id, sub in open_subs.items() if error else ():
            token = sub.token
            body = {"error": error, "code": code, "token": token.compact(), "seq": token.seq}
            frames.append(json.dumps(["CHANGES", sub_id, "ERR", body]))
        deadline = asyncio.get_running_loop().time() + CLOSE_GRACE_S
        for text in frames:
            await _bounded(self.ws.send_text(text), deadline)
        await _bounded(self.ws.close(code, reason[:120]), deadline)

    async def run_subscription(self, sub_id: str, sub: Subscription) -> None:
        metrics = self.relay.metrics
        with sub:
            metrics.feed_subscribers.labels("websocket").inc()
            try:
                async for message in sub.messages():
                    if isinstance(message, Events):
                        await self._send_events(sub_id, sub, message)
                        continue
                    frame = _ws_frame(sub_id, message)
                    if frame is not None:
                        await self.send_frame(frame, (sub_id, sub))
            except WebSocketDisconnect:
                pass  # the socket closes (the client left, or it stalled)
            except FeedError as exc:  # the epoch changed under a live follow
                count_error(self.ws, exc)
                body = exc.body() | {"status": exc.status}
                with contextlib.suppress(WebSocketDisconnect):
                    await self.send_frame(["CHANGES", sub_id, "ERR", body])
            except Exception as exc:
                log.warning("changes feed failed: %s", exc)
                with contextlib.suppress(WebSocketDisconnect):
                    await self.send_frame(["CHANGES", sub_id, "ERR", {"error": "the feed failed"}])
            finally:
                metrics.feed_subscribers.labels("websocket").dec()
                if self.subs.get(sub_id) is sub and not self.closed:  # else: its ERR is due
                    del self.subs[sub_id]
                    self.tasks.pop(sub_id, None)
                    self.busy_at = asyncio.get_running_loop().time()

    async def _send_events(self, sub_id: str, sub: Subscription, message: Events) -> None:
        # the event JSON is encoded once for all subscribers; only the prefix is ours
        prefix = f'["CHANGES", {json.dumps(sub_id)}, "EVENT", '
        for event in message.events:
            await self.send(f"{prefix}{event.seq}, {event.json}]", (sub_id, sub))
            sub.passed(event.seq)
        last = message.events[-1].seq
        self.relay.metrics.feed_delivered(last, sub.feed.hub.known_head, len(message.events))

    async def handle(self, text: str) -> None:
        try:
            if len(text) > MAX_WS_MESSAGE_BYTES:
                raise FeedRequestError(f"message over {MAX_WS_MESSAGE_BYTES} bytes")
            frame = json_value(text)
        except ValueError:
            await self.send_frame(["NOTICE", "message is not JSON"])
            return
        except FeedRequestError as exc:
            await self.send_frame(["NOTICE", str(exc)])
            return
        expected = 'expected ["CHANGES", subId, filter] or ["CLOSE", subId]'
        if not (isinstance(frame, list) and len(frame) >= 2 and isinstance(frame[1], str)):
            await self.send_frame(["NOTICE", expected])
            return
        verb, sub_id = frame[0], frame[1]
        if not 0 < len(sub_id) <= MAX_SUB_ID_CHARS:
            await self.send_frame(["NOTICE", f"subId must be 1..{MAX_SUB_ID_CHARS} characters"])
            return
        if verb == "CLOSE" and len(frame) == 2:
            self._cancel(sub_id)
        elif verb == "CHANGES" and len(frame) == 3:
            await self.open(sub_id, frame[2])
        elif verb in ("CHANGES", "CLOSE"):  # a known verb with too few or too many parts
            await self.send_frame(["NOTICE", expected])
        else:
            await self.send_frame(["NOTICE", f"unknown message {str(verb)[:20]!r}"])

    def _cancel(self, sub_id: str) -> None:
        task = self.tasks.pop(sub_id, None)
        sub = self.subs.pop(sub_id, None)
        if task is not None:
            self.busy_at = asyncio.get_running_loop().time()
        if sub is not None:
            sub.release()  # now: its task may be cancelled before it ever ran
        if task is not None:
            task.cancel()

    async def open(self, sub_id: str, raw_filter: Any) -> None:
        self._cancel(sub_id)  # a subId reused: the new filter replaces the old one
        if len(self.tasks) >= MAX_WS_SUBSCRIPTIONS:
            error = {"error": f"at most {MAX_WS_SUBSCRIPTIONS} subscriptions per socket"}
            await self.send_frame(["CHANGES", sub_id, "ERR", error])
            return
        try:
            flt = filter_from_json(raw_filter)
            sub = await self.relay.feed.open(flt, "websocket", bootstrap_url(self.ws))
        except FeedError as exc:
            count_error(self.ws, exc)
            body = exc.body() | {"status": exc.status}
            await self.send_frame(["CHANGES", sub_id, "ERR", body])
            return
        self.subs[sub_id] = sub
        self.tasks[sub_id] = asyncio.create_task(self.run_subscription(sub_id, sub))

    async def until_idle(self) -> None:
        """Return once no subscription has been open for ``IDLE_TIMEOUT_S``."""
        loop = asyncio.get_running_loop()
        while self.tasks or (left := self.busy_at + IDLE_TIMEOUT_S - loop.time()) > 0:
            await asyncio.sleep(IDLE_TIMEOUT_S if self.tasks else left)
        self.idle = True

    async def until_unanswered(self) -> None:
        """Return once the client has sent nothing for ``UNANSWERED_PINGS`` ping
        intervals; never where the server does not ping or say so."""
        heard = self.ws.scope.get("extensions", {}).get(HEARD_EXTENSION)
        if heard is None:
            await asyncio.Future()  # cancelled with the socket
        limit = UNANSWERED_PINGS * heard["ping_interval_s"]
        while (left := limit - heard["quiet_s"]()) > 0:
            await asyncio.sleep(left)
        self.relay.metrics.feed_unanswered_closed.inc()
        self.unanswered = limit

    async def stop(self) -> dict[str, Subscription]:
        """Cancel every subscription; the ones still open, by subId."""
        open_subs = dict(self.subs)
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        return open_subs


async def _bounded(send: Awaitable[None], deadline: float) -> None:
    remaining = deadline - asyncio.get_running_loop().time()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(send, max(0.01, min(FINAL_FRAME_WAIT_S, remaining)))


def _ws_frame(sub_id: str, message: FeedMessage) -> list[Any] | None:
    if isinstance(message, Snapshot):
        return ["CHANGES", sub_id, "SNAPSHOT", message.item]
    if isinstance(message, Status):
        return ["CHANGES", sub_id, "STATUS", message.to_json()]
    if isinstance(message, Eose):
        return ["CHANGES", sub_id, "EOSE", message.token.seq, message.token.compact()]
    return None  # heartbeats: the server pings the socket (relay.cli.serve)


async def _receive(ws: WebSocket, socket: _Socket) -> None:
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:  # a binary frame: not a request, and no reason to hang up
                await socket.send_frame(["NOTICE", "binary messages are not requests"])
                continue
            await socket.handle(text)


async def changes_ws(ws: WebSocket) -> None:
    await ws.accept()
    socket = _Socket(ws)
    receiver = asyncio.create_task(_receive(ws, socket))
    closing = asyncio.create_task(socket.done.wait())
    idle = asyncio.create_task(socket.until_idle())
    unanswered = asyncio.create_task(socket.until_unanswered())
    watched = {receiver, closing, idle, unanswered}
    try:
        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in watched:
            task.cancel()
        open_subs = await socket.stop()
        if ws.client_state is WebSocketState.CONNECTED:
            await socket.close(open_subs)
