"""Per-client rate limiting of ``POST /operations`` (issue 7 "Limits").

A token bucket per client IP: ``capacity`` tokens, refilled at ``rate``
tokens per second; a request takes one token or is answered 429 with a
``Retry-After`` (whole seconds until a token is back). The client IP is the
socket peer, unless that peer is a configured trusted proxy: then
``X-Forwarded-For`` is walked right to left, skipping trusted hops, and the
first untrusted address is the client. A forwarded header from an
untrusted peer is ignored (it is trivially forged). An IPv6 client is its
/64 network (one host is routinely handed a whole /64, so per address it
could take a fresh bucket for every request); an IPv4-mapped address is
the IPv4 client it maps.

Not limited here: reads (GETs are cheap and cacheable), the body cap (413,
``relay.http.params``), the blob cap. Buckets live in process memory, so
with several workers each worker limits on its own.
"""

from __future__ import annotations

import ipaddress
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_TRACKED_CLIENTS",
    "RateLimit",
    "RateLimitMiddleware",
    "TokenBuckets",
    "bucket_key",
    "client_ip",
    "parse_rate_limit",
    "parse_trusted_proxies",
]

IPV6_CLIENT_PREFIX = 64
MAX_TRACKED_CLIENTS = 100_000  # least recently seen buckets are evicted past this
RATE_WINDOWS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}
LIMITED_ROUTES = frozenset({("POST", "/operations")})

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class RateLimit:
    """``capacity`` requests at once, refilled at ``rate`` per second."""

    rate: float
    capacity: float

    def __post_init__(self) -> None:
        if not (self.rate > 0 and self.capacity >= 1):
            raise ValueError("rate must be positive and capacity at least 1")


def parse_rate_limit(text: str) -> RateLimit | None:
    """``N/s``, ``N/m`` or ``N/h`` (N requests per window, bursts up to N);
    ``off``/``0``/empty disables. Raises ValueError."""
    text = text.strip().lower()
    if text in ("", "off", "0", "none"):
        return None
    count_text, _, window = text.partition("/")
    if window not in RATE_WINDOWS_S:
        raise ValueError(f"expected N/s, N/m or N/h (or off), got {text!r}")
    try:
        count = float(count_text)
    except ValueError:
        raise ValueError(f"expected N/s, N/m or N/h (or off), got {text!r}") from None
    if not (math.isfinite(count) and count >= 1):
        raise ValueError(f"the request count must be at least 1, got {count_text!r}")
    return RateLimit(rate=count / RATE_WINDOWS_S[window], capacity=count)


def parse_trusted_proxies(values: Iterable[str]) -> tuple[Network, ...]:
    """IP addresses or CIDR networks; raises ValueError naming the bad one."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"not an IP address or CIDR network: {value!r}") from None
    return tuple(networks)


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address, an IPv4-mapped one as its IPv4 address (a dual-stack
    socket reports IPv4 peers so, and they must match IPv4 proxies)."""
    try:
        ip = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    return ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip


def client_ip(peer: str | None, forwarded_for: str | None, trusted: tuple[Network, ...]) -> str:
    """The client address of a request from socket peer ``peer``."""
    if peer is None:
        return "unknown"

    def is_trusted(addr: str) -> bool:
        ip = _parse_ip(addr)
        return ip is not None and any(ip in net for net in trusted)

    if not trusted or not forwarded_for or not is_trusted(peer):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not is_trusted(hop):
            return hop if _parse_ip(hop) is not None else peer
    return hops[0] if hops else peer


def bucket_key(client: str) -> str:
    """The bucket of client address ``client`` (see the module docstring)."""
    ip = _parse_ip(client)
    if ip is None:
        return client
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))


class TokenBuckets:
    """Token buckets keyed by client; ``take`` answers 0 or seconds to wait."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> float:
        now = self._clock()
        tokens, stamp = self._buckets.pop(key, (self._limit.capacity, now))
        tokens = min(self._limit.capacity, tokens + (now - stamp) * self._limit.rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self._limit.rate
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > MAX_TRACKED_CLIENTS:
            self._buckets.popitem(last=False)
        return wait


class RateLimitMiddleware:
    """Pure ASGI middleware applying ``TokenBuckets`` to ``LIMITED_ROUTES``."""

    def __init__(
        self,
        app: Any,
        limit: RateLimit | None,
        trusted_proxies: tuple[Network, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.buckets = TokenBuckets(limit, clock) if limit is not None else None
        self.trusted = trusted_proxies

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            self.buckets is None
            or scope["type"] != "http"
            or (scope["method"], scope["path"]) not in LIMITED_ROUTES
        ):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        forwarded = headers.get(b"x-forwarded-for", b"").decode("latin-1") or None
        peer = scope.get("client")
        client = client_ip(peer[0] if peer else None, forwarded, self.trusted)
        wait = self.buckets.take(bucket_key(client))
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "rate limit exceeded; retry later"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 429,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(max(1, math.ceil(wait))).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
