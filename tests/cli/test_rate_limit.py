"""Per-client-IP token buckets on POST /operations: 429 with Retry-After;
X-Forwarded-For believed only from trusted proxies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from relay import create_relay
from relay.config import RelayConfig
from relay.limits import TokenBuckets, client_ip, parse_rate_limit, parse_trusted_proxies
from relay.testing.workload import mixed_workload
from tests.support.asgi_client import asgi_client

TRUSTED = parse_trusted_proxies(["10.0.0.0/8"])


def test_bucket_allows_a_burst_then_refills() -> None:
    now = [0.0]
    limit = parse_rate_limit("2/s")
    assert limit is not None
    buckets = TokenBuckets(limit, clock=lambda: now[0])
    assert [buckets.take("a"), buckets.take("a")] == [0, 0]
    assert buckets.take("a") == pytest.approx(0.5)
    assert buckets.take("b") == 0  # buckets are per client
    now[0] += 0.5
    assert buckets.take("a") == 0


@pytest.mark.parametrize(
    ("peer", "xff", "expected"),
    [
        ("1.2.3.4", "9.9.9.9", "1.2.3.4"),  # untrusted peer: header ignored
        ("10.0.0.5", "9.9.9.9", "9.9.9.9"),
        ("10.0.0.5", "8.8.8.8, 9.9.9.9, 10.0.0.7", "9.9.9.9"),  # skip trusted hops
        ("10.0.0.5", "10.1.1.1", "10.1.1.1"),  # all trusted: leftmost
        ("10.0.0.5", "garbage", "10.0.0.5"),
        ("10.0.0.5", None, "10.0.0.5"),
        ("::ffff:10.0.0.5", "9.9.9.9", "9.9.9.9"),  # a dual-stack socket's IPv4 peer
    ],
)
def test_client_ip(peer: str, xff: str | None, expected: str) -> None:
    assert client_ip(peer, xff, TRUSTED) == expected


@pytest.mark.parametrize("text", ["1/x", "abc/s", "0.5/s", "inf/s", "10"])
def test_bad_rate_limits(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate_limit(text)


@pytest.fixture
async def limited() -> AsyncIterator[httpx.AsyncClient]:
    config = RelayConfig(
        rate_limit=parse_rate_limit("2/m"), trusted_proxies=parse_trusted_proxies(["127.0.0.1"])
    )
    relay = create_relay(config=config)
    async with relay.running(), asgi_client(relay.app, client=("127.0.0.1", 1234)) as c:
        yield c


async def test_post_operations_is_limited_per_forwarded_client(limited: httpx.AsyncClient) -> None:
    body = {"operations": mixed_workload(1, seed=3)[:1]}
    alice = {"X-Forwarded-For": "203.0.113.1"}
    codes = [
        (await limited.post("/operations", json=body, headers=alice)).status_code for _ in range(3)
    ]
    assert codes == [200, 200, 429]
    refused = await limited.post("/operations", json=body, headers=alice)
    assert refused.json() == {"error": "rate limit exceeded; retry later"}
    assert 1 <= int(refused.headers["retry-after"]) <= 30
    bob = {"X-Forwarded-For": "203.0.113.2"}
    assert (await limited.post("/operations", json=body, headers=bob)).status_code == 200
    assert (await limited.get("/log", headers=alice)).status_code == 200  # reads are not limited


async def test_an_ipv6_client_is_limited_per_64_network(limited: httpx.AsyncClient) -> None:
    """One host routinely holds a /64: a fresh address per request is no new bucket."""
    body = {"operations": mixed_workload(1, seed=3)[:1]}
    rotated = ["2001:db8:1::1", "2001:db8:1::2", "2001:db8:1:0:ffff:ffff:ffff:3"]
    codes = [
        (await limited.post("/operations", json=body, headers={"X-Forwarded-For": ip})).status_code
        for ip in rotated
    ]
    assert codes == [200, 200, 429]
    other = {"X-Forwarded-For": "2001:db8:2::1"}
    assert (await limited.post("/operations", json=body, headers=other)).status_code == 200


async def test_a_proxy_seen_through_a_dual_stack_socket_is_trusted() -> None:
    """A socket bound to ``::`` reports an IPv4 peer as ``::ffff:a.b.c.d``."""
    config = RelayConfig(
        rate_limit=parse_rate_limit("1/m"), trusted_proxies=parse_trusted_proxies(["10.0.0.0/8"])
    )
    relay = create_relay(config=config)
    body = {"operations": mixed_workload(1, seed=3)[:1]}
    async with relay.running(), asgi_client(relay.app, client=("::ffff:10.0.0.5", 1234)) as c:
        codes = [
            (await c.post("/operations", json=body, headers={"X-Forwarded-For": ip})).status_code
            for ip in ("203.0.113.1", "203.0.113.2", "203.0.113.1")
        ]
    assert codes == [200, 200, 429]  # one bucket per forwarded client, not the proxy's
