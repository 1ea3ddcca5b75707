"""``HttpPeerClient``: the default ``PeerClient`` over HTTP (WEB-RELAY.md
"PeerClient Interface", openapi.yaml).

One ``httpx.AsyncClient`` serves every peer. It is injected (tests pass one
whose transport routes to in-process apps) or owned and closed by
``aclose()``. Every call has explicit connect/read timeouts and a deadline for the
whole exchange (a peer trickling bytes inside the read timeout), and responses
are streamed and abandoned once they pass ``max_response_bytes``, so a peer
that serves a huge page costs at most that much memory. The cap counts
decoded bytes as they are inflated (``gzip`` or ``deflate``, one layer), so
a small compressed body cannot inflate past it either; any other
``Content-Encoding`` is a malformed answer.

Failures raise the ``PeerError`` tree of ``peer.base``; this module does not
log (the caller logs once, with the peer URL, when it decides what to do).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from peer.base import (
    LOCAL_ONLY_HEADER,
    PeerBadStatus,
    PeerBusy,
    PeerError,
    PeerLogPage,
    PeerMalformedPage,
    PeerResponseTooLarge,
    PeerTimeout,
    PeerUnreachable,
    SubmitResult,
    parse_log_page,
)
from peer.inflate import ACCEPTED_ENCODINGS, EncodingError, decompressor, inflate
from relay.protocol.untrusted import ascii_decimal, json_value

DEFAULT_CONNECT_TIMEOUT_S = 2.0
DEFAULT_READ_TIMEOUT_S = 10.0
DEFAULT_WRITE_TIMEOUT_S = 10.0
DEFAULT_POOL_TIMEOUT_S = 5.0
DEFAULT_REQUEST_DEADLINE_S = 60.0  # one whole exchange: 8 MiB at ~140 KB/s
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
DEFAULT_PAGE_LIMIT = 100  # the spec's default page size
MAX_PAGE_LIMIT = 1000  # the spec's maximum page size
MAX_SUBMIT_OPERATIONS = 100  # openapi.yaml: operations maxItems
# answers that mean "no room now, come back after Retry-After" (a relay's own
# bound on work at once, or a rate limit in front of it)
BUSY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class PeerLimits:
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S
    pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S
    request_deadline_s: float = DEFAULT_REQUEST_DEADLINE_S
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout_s,
            read=self.read_timeout_s,
            write=self.write_timeout_s,
            pool=self.pool_timeout_s,
        )


class HttpPeerClient:
    """``PeerClient`` over one shared ``httpx.AsyncClient``."""

    def __init__(
        self, client: httpx.AsyncClient | None = None, limits: PeerLimits | None = None
    ) -> None:
        self.limits = limits or PeerLimits()
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=self.limits.timeout(),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    # -- the four calls -----------------------------------------------------------
    async def get_identity_log(
        self, peer_url: str, did: str, after: str | None = None, limit: int | None = None
    ) -> PeerLogPage | None:
        return await self._chain_log(peer_url, f"/identities/{did}/log", after, limit)

    async def get_content_log(
        self, peer_url: str, content_id: str, after: str | None = None, limit: int | None = None
    ) -> PeerLogPage | None:
        return await self._chain_log(peer_url, f"/content/{content_id}/log", after, limit)

    async def get_operation_log(
        self,
        peer_url: str,
        after: str | None = None,
        limit: int | None = None,
        scope: str | None = None,
    ) -> PeerLogPage:
        limit = _clamp(limit)
        params = _params(after, limit)
        if scope is not None:
            params["scope"] = scope
        status, data = await self._request("GET", peer_url, "/log", params)
        if status != 200:
            raise PeerBadStatus(peer_url, status, _error_text(data))
        return parse_log_page(peer_url, data, limit)

    async def submit_operations(
        self,
        peer_url: str,
        operations: Sequence[str],
        headers: Mapping[str, str] | None = None,
    ) -> list[SubmitResult]:
        if not 1 <= len(operations) <= MAX_SUBMIT_OPERATIONS:
            raise ValueError(f"submit 1..{MAX_SUBMIT_OPERATIONS} operations, not {len(operations)}")
        status, data = await self._request(
            "POST",
            peer_url,
            "/operations",
            json_body={"operations": list(operations)},
            headers=dict(headers) if headers else None,
        )
        if status != 200:
            raise PeerBadStatus(peer_url, status, _error_text(data))
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list) or len(results) != len(operations):
            raise PeerMalformedPage(peer_url, "POST /operations answer lacks one result per op")
        return [_submit_result(r) for r in results]

    async def get_well_known(self, peer_url: str) -> dict[str, Any]:
        """The peer's ``/.well-known/dfos-relay`` document (shape: a JSON
        object; its fields are the caller's to check)."""
        status, data = await self._request("GET", peer_url, "/.well-known/dfos-relay")
        if status != 200:
            raise PeerBadStatus(peer_url, status, _error_text(data))
        if not isinstance(data, dict):
            raise PeerMalformedPage(peer_url, "well-known document is not a JSON object")
        return data

    # -- plumbing -----------------------------------------------------------------
    async def _chain_log(
        self, peer_url: str, path: str, after: str | None, limit: int | None
    ) -> PeerLogPage | None:
        limit = _clamp(limit)
        status, data = await self._request(
            "GET", peer_url, path, _params(after, limit), headers={LOCAL_ONLY_HEADER: "1"}
        )
        if status == 404:
            return None
        if status != 200:
            raise PeerBadStatus(peer_url, status, _error_text(data))
        return parse_log_page(peer_url, data, limit)

    async def _request(
        self,
        method: str,
        peer_url: str,
        path: str,
        params: dict[str, str] | None = None,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        busy: bool = False,
    ) -> tuple[int, Any]:
        """(status, parsed JSON or None); the body is read up to the size cap."""
        status, body = await self._exchange(
            method, peer_url, path, params, json_body=json_body, headers=headers, busy=busy
        )
        if not body:
            return status, None
        try:
            return status, json_value(body)
        except ValueError as exc:
            if 200 <= status < 300:
                raise PeerMalformedPage(peer_url, f"{method} {path}: body is not JSON") from exc
            return status, None

    async def _exchange(
        self,
        method: str,
        peer_url: str,
        path: str,
        params: dict[str, str] | None = None,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        busy: bool = False,
    ) -> tuple[int, bytes]:
        """(status, raw body read up to the size cap); failures as ``PeerError``.
        With ``busy``, a 503 or 429 that names a ``Retry-After`` in seconds is
        ``PeerBusy`` (an HTTP-date there is not read: a plain bad status)."""
        try:
            async with (
                asyncio.timeout(self.limits.request_deadline_s),
                self._client.stream(
                    method,
                    peer_url + path,
                    params=params,
                    json=json_body,
                    content=content,
                    # only what _read_capped inflates with a bound, whatever
                    # codecs httpx would announce (br, zstd when installed)
                    headers={"accept-encoding": ACCEPTED_ENCODINGS, **(headers or {})},
                    timeout=self.limits.timeout(),
                ) as response,
            ):
                body = await self._read_capped(peer_url, response)
                status = response.status_code
                retry_after = _retry_after(response) if busy else None
                if retry_after is not None and status in BUSY_STATUSES:
                    raise PeerBusy(peer_url, status, retry_after, _body_error(body))
                return status, body
        except PeerError:
            raise
        except TimeoutError as exc:  # the deadline (before OSError: it is one)
            deadline = self.limits.request_deadline_s
            raise PeerTimeout(peer_url, f"{method} {path} passed its {deadline}s deadline") from exc
        except httpx.TimeoutException as exc:
            kind = type(exc).__name__
            raise PeerTimeout(peer_url, f"{method} {path} timed out ({kind})") from exc
        except (httpx.TransportError, OSError) as exc:
            raise PeerUnreachable(peer_url, f"{method} {path}: {type(exc).__name__} {exc}") from exc

    async def _read_capped(self, peer_url: str, response: httpx.Response) -> bytes:
        cap = self.limits.max_response_bytes
        declared = response.headers.get("content-length")
        size_declared = ascii_decimal(declared) if declared is not None else None
        if size_declared is not None and size_declared > cap:
            raise PeerResponseTooLarge(peer_url, f"declared {declared} bytes > cap {cap}")
        if response.is_stream_consumed:  # read before us (a transport that wraps another)
            body = response.content
            if len(body) > cap:
                raise PeerResponseTooLarge(peer_url, f"response passed the {cap}-byte cap")
            return body
        inflater = _decompressor(peer_url, response)
        chunks: list[bytes] = []
        received = size = 0
        # raw bytes, inflated here with a bound: httpx would inflate each
        # network chunk whole (a 64 KiB gzip chunk is 64 MiB) before we count it
        async for raw in response.aiter_raw():
            received += len(raw)
            chunk = raw if inflater is None else _inflate(peer_url, inflater, raw, cap - size + 1)
            size += len(chunk)
            if size > cap or received > cap:  # leaving the stream context closes the connection
                raise PeerResponseTooLarge(peer_url, f"response passed the {cap}-byte cap")
            chunks.append(chunk)
        if inflater is not None and received and not inflater.eof:
            raise PeerMalformedPage(peer_url, "compressed response is truncated")
        return b"".join(chunks)


def _decompressor(peer_url: str, response: httpx.Response) -> zlib._Decompress | None:
    try:
        return decompressor(response.headers)
    except EncodingError as exc:
        raise PeerMalformedPage(peer_url, str(exc)) from exc


def _inflate(peer_url: str, inflater: zlib._Decompress, raw: bytes, max_length: int) -> bytes:
    """At most ``max_length`` bytes of ``raw`` inflated (more stays unread:
    the caller treats a full ``max_length`` as passing the cap)."""
    try:
        return inflate(inflater, raw, max_length)
    except EncodingError as exc:
        raise PeerMalformedPage(peer_url, str(exc)) from exc


def _clamp(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_PAGE_LIMIT
    return max(1, min(limit, MAX_PAGE_LIMIT))


def _params(after: str | None, limit: int) -> dict[str, str]:
    params = {"limit": str(limit)}
    if after is not None:
        params["after"] = after
    return params


def _retry_after(response: httpx.Response) -> int | None:
    """``Retry-After`` as whole seconds, or None (absent, or an HTTP-date)."""
    raw = response.headers.get("retry-after")
    return None if raw is None else ascii_decimal(raw.strip())


def _body_error(body: bytes) -> str:
    try:
        return _error_text(json_value(body))
    except ValueError:
        return ""


def _error_text(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return data["error"][:200]
    return ""


def _submit_result(result: object) -> SubmitResult:
    fields = result if isinstance(result, dict) else {}
    status, reason = fields.get("status"), fields.get("reason")
    return SubmitResult(
        status if isinstance(status, str) else "", reason if isinstance(reason, str) else None
    )
