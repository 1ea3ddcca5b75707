"""A client of a relay's changes feed (``GET /changes`` over SSE).

``follow(url, ...)`` is an async iterator of ``FeedEvent``. It reconnects
with exponential backoff when the connection drops, resuming from the last
token it yielded (``Last-Event-ID``), so nothing is missed or repeated
(``FollowOptions.on_connect`` is told of each connection it opens); a
410 raises ``FeedGapError`` (with the relay's minSeq, epoch and bootstrap
URL) and a relay without a feed (a v0.7.1 relay: 404) raises
``FeedUnavailable``. Other 4xx answers raise ``FeedRejected``. One event
(its lines up to the blank line) holds at most ``MAX_EVENT_BYTES``: a peer
streaming past that breaks the connection, like any other fault. The
stream is inflated in bounded steps (``peer.inflate``) and a refusal's
body is read up to ``MAX_ERROR_BYTES``, so neither a compressed body nor
an endless error page grows past those bounds.
"""

from __future__ import annotations

import asyncio
import codecs
import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from peer.inflate import ACCEPTED_ENCODINGS, EncodingError, inflated
from relay.protocol.untrusted import ascii_decimal, json_value

# One event of the feed: an op's token (the relay takes 4 MiB bodies) in its
# JSON envelope, with room.
MAX_EVENT_BYTES = 6 * 1024 * 1024
# A progress token is ``<epoch>.<seq>``; the follower saves it as the peer's
# cursor and sends it back in a URL, so one this long is not a token.
MAX_TOKEN_CHARS = 256
# The body of a refusal (a 410 names the peer's epoch and minSeq): read this
# much of it at most.
MAX_ERROR_BYTES = 64 * 1024


class FeedClientError(Exception):
    pass


class FeedGapError(FeedClientError):
    """The position is gone on that relay: bootstrap (or reconcile) again."""

    def __init__(self, message: str, min_seq: int, epoch: str, bootstrap: str) -> None:
        super().__init__(message)
        self.min_seq = min_seq
        self.epoch = epoch
        self.bootstrap = bootstrap


class FeedUnavailable(FeedClientError):
    """The relay serves no changes feed (a v0.7.1 relay)."""


class FeedRejected(FeedClientError):
    """The relay refused the request (a malformed filter or token: 400)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


@dataclass(frozen=True, slots=True)
class FeedEvent:
    kind: str  # status | snapshot | op | eose
    data: dict[str, Any]
    token: str | None = None  # the progress token to resume after this event


@dataclass(frozen=True, slots=True)
class FollowOptions:
    mode: str = "tail"
    live: bool = True
    kinds: Sequence[str] = ()
    authors: Sequence[str] = ()
    chains: Sequence[str] = ()
    scope: Sequence[str] = ()  # DIDs and contentIds, served with their closure
    limit: int | None = None
    until_seq: int | None = None
    max_retries: int | None = None  # None: reconnect forever
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    read_timeout_s: float = 60.0  # > the relay's heartbeat interval
    # told of each failed attempt that will be retried: (failures so far,
    # seconds until the next, why), so a follower that never connects is not silent
    on_retry: Callable[[int, float, Exception], None] | None = None
    # told as each connection is attempted (the first, and each reconnect,
    # after its pause): a caller timing a connection's silence starts anew
    on_connect: Callable[[], None] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def params(self, since: str | None) -> dict[str, str]:
        out: dict[str, str] = {"mode": self.mode, "live": "true" if self.live else "false"}
        for name, values in (("kinds", self.kinds), ("authors", self.authors),
                             ("chains", self.chains), ("scope", self.scope)):  # fmt: skip
            if values:
                out[name] = ",".join(values)
        if self.limit is not None:
            out["limit"] = str(self.limit)
        if self.until_seq is not None:
            out["until_seq"] = str(self.until_seq)
        if since is not None and self.mode == "tail":
            out["since"] = since
        out.update(self.extra)
        return out


async def follow(
    url: str,
    since: str | None = None,
    options: FollowOptions | None = None,
    client: httpx.AsyncClient | None = None,
) -> AsyncIterator[FeedEvent]:
    """Events of ``url``'s feed from ``since`` (a token or seq), reconnecting."""
    opts = options or FollowOptions()
    if since is not None and opts.mode == "bootstrap":
        raise ValueError("since resumes a tail; a bootstrap starts at a snapshot")
    own = client is None
    http = client or httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=opts.read_timeout_s))
    position = since
    failures = 0
    mode = opts.mode
    try:
        while True:
            current = FollowOptions(**{**_fields(opts), "mode": mode})
            if opts.on_connect is not None:
                opts.on_connect()
            try:
                async for event in _one_connection(http, url, position, current):
                    failures = 0
                    if event.token is not None:
                        position = event.token
                    yield event
                    if event.kind == "eose" and mode == "bootstrap":
                        if not opts.live:
                            return
                        mode = "tail"  # a bootstrap continues as a tail from its snapshot
                if not opts.live or _reached(position, opts.until_seq):
                    return  # a live stream with until_seq ends there, and only there
                # the relay ended a live stream (it restarts, say): reconnect, not at once
                await asyncio.sleep(opts.backoff_base_s * (0.5 + random.random() / 2))
            except (httpx.TransportError, SSEError) as exc:
                failures += 1
                if opts.max_retries is not None and failures > opts.max_retries:
                    why = str(exc).removeprefix(f"{url}: ")  # the URL once
                    raise FeedClientError(
                        f"{url}: gave up after {failures} failures: {why}"
                    ) from exc
                delay = min(opts.backoff_max_s, opts.backoff_base_s * 2 ** (failures - 1))
                delay *= 0.5 + random.random() / 2
                if opts.on_retry is not None:
                    opts.on_retry(failures, delay, exc)
                await asyncio.sleep(delay)
                if mode == "bootstrap" and position is not None:
                    mode = "tail"
    finally:
        if own:
            await http.aclose()


def _reached(position: str | None, until_seq: int | None) -> bool:
    """``position`` (a token or a seq) is at ``until_seq`` or past it."""
    if until_seq is None or position is None:
        return False
    seq = ascii_decimal(position.rpartition(".")[2])
    return seq is not None and seq >= until_seq


def _fields(opts: FollowOptions) -> dict[str, Any]:
    return {name: getattr(opts, name) for name in FollowOptions.__dataclass_fields__}


async def _one_connection(
    http: httpx.AsyncClient, url: str, since: str | None, opts: FollowOptions
) -> AsyncIterator[FeedEvent]:
    endpoint = url.rstrip("/") + "/changes"
    # only what ``inflated`` decodes with a bound, whatever httpx would announce
    headers = {"accept-encoding": ACCEPTED_ENCODINGS}
    params = opts.params(since)
    async with aconnect_sse(http, "GET", endpoint, params=params, headers=headers) as source:
        response = source.response
        if response.status_code != 200:
            _raise_for(url, response.status_code, await _error_body(url, response))
        content_type = response.headers.get("content-type", "").partition(";")[0]
        if "text/event-stream" not in content_type:
            raise SSEError(f"{url}: feed answered content-type {content_type[:80]!r}")
        async for sse in _bounded_events(url, response):
            if not sse.event or sse.event == "message":
                continue
            data = _event_data(url, sse.event, sse.data)
            if sse.event == "error":
                if data.get("status") == 410:  # the epoch changed while we followed
                    raise _gap(url, data)
                raise httpx.RemoteProtocolError(f"{url}: feed error: {data.get('error')}")
            token = sse.id or None if sse.event in ("op", "eose") else None
            if token is not None and len(token) > MAX_TOKEN_CHARS:
                raise httpx.RemoteProtocolError(f"{url}: feed event id is not a token")
            yield FeedEvent(sse.event, data, token)


async def _bounded_events(url: str, response: httpx.Response) -> AsyncIterator[ServerSentEvent]:
    """``response``'s events (httpx-sse's decoders), refusing one that
    passes ``MAX_EVENT_BYTES`` before its blank line, on one line or many."""
    lines, decoder = SSELineDecoder(), SSEDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")  # SSE is UTF-8
    held = 0  # characters since the last event ended (one chunk of slack)
    async for piece in _body(url, response):
        text = utf8.decode(piece)
        held += len(text)
        if held > MAX_EVENT_BYTES:
            raise httpx.RemoteProtocolError(f"{url}: feed event over {MAX_EVENT_BYTES} bytes")
        for line in lines.decode(text):
            sse = decoder.decode(line)
            if not line:
                held = 0
            if sse is not None:
                yield sse
    for line in [*lines.decode(utf8.decode(b"", final=True)), *lines.flush()]:
        sse = decoder.decode(line)
        if sse is not None:
            yield sse


def _event_data(url: str, event: str, text: str) -> dict[str, Any]:
    """An event's data: a JSON object, or the connection is broken (retried
    with backoff, like any other fault of the peer's stream)."""
    try:
        data = json_value(text) if text else {}
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise httpx.RemoteProtocolError(f"{url}: feed event {event!r} is not a JSON object")
    return data


async def _body(url: str, response: httpx.Response) -> AsyncIterator[bytes]:
    """``response``'s body decoded in bounded pieces (``peer.inflate``); a
    body we cannot decode breaks the connection, like any stream fault."""
    try:
        async for piece in inflated(response):
            yield piece
    except EncodingError as exc:
        raise httpx.RemoteProtocolError(f"{url}: feed body: {exc}") from exc


async def _error_body(url: str, response: httpx.Response) -> bytes:
    """At most ``MAX_ERROR_BYTES`` of a refusal's body: an error document,
    not a stream a peer may make endless."""
    body = b""
    async for piece in _body(url, response):
        body += piece[: MAX_ERROR_BYTES - len(body)]
        if len(body) >= MAX_ERROR_BYTES:
            break
    return body


def _raise_for(url: str, status: int, raw: bytes) -> None:
    try:
        body: Any = json_value(raw)
    except ValueError:
        body = raw[:200].decode("utf-8", "replace")
    if status == 410 and isinstance(body, dict):
        raise _gap(url, body)
    if status in (404, 405, 501):
        raise FeedUnavailable(f"{url} serves no changes feed ({status})")
    if status >= 500:
        raise httpx.RemoteProtocolError(f"{url}: {status}")  # retried with backoff
    raise FeedRejected(status, body)


def _gap(url: str, body: dict[str, Any]) -> FeedGapError:
    min_seq = body.get("minSeq", 1)  # the peer's word: a 410 says "gap" whatever its body
    return FeedGapError(
        f"{url}: {str(body.get('error'))[:300]}",
        min_seq if isinstance(min_seq, int) and not isinstance(min_seq, bool) else 1,
        str(body.get("epoch", ""))[:200],
        str(body.get("bootstrap", ""))[:2000],
    )
