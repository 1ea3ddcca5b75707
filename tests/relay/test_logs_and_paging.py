"""WEB-RELAY.md "Operation Log": the global log in ingestion order, per-chain
logs in chain order, after/limit paging (default 100, max 1000), bad
parameters are 400s, the cursor is null once caught up, and GET /log is 501
when the log is disabled."""

from __future__ import annotations

import httpx
import pytest

from relay import create_relay
from relay.protocol import decode_jws
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS, get_json, log_cids, post


async def test_global_log_is_in_ingestion_order(client: httpx.AsyncClient) -> None:
    base = await log_cids(client)  # the relay's own genesis + profile
    assert len(base) == 2
    b = WorkloadBuilder(seed=111, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(bob)
    b.artifact(alice)
    g_alice, g_bob, create, art = b.tokens
    await post(client, [g_bob, create])
    await post(client, [art, g_alice])  # art waits for alice, woken in-request
    cids = await log_cids(client)
    assert cids[2:] == [bob.head_cid, chain.genesis_cid, alice.head_cid, decode_jws(art).header_cid]
    page = await get_json(client, "/log")
    entry = page["entries"][2]
    assert entry == {
        "cid": bob.head_cid,
        "jwsToken": g_bob,
        "kind": "identity-op",
        "chainId": bob.did,
    }


async def test_chain_logs_are_in_chain_order_with_chain_shape(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=112, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    for _ in range(3):
        b.content_update(chain)
    b.rotate(alice)
    await post(client, list(reversed(b.tokens)))
    log = await get_json(client, f"/content/{chain.content_id}/log")
    assert [e["cid"] for e in log["entries"]] == [cid for cid, _ in chain.ops]
    assert set(log["entries"][0]) == {"cid", "jwsToken"} and log["cursor"] is None
    ident = await get_json(client, f"/identities/{alice.did}/log")
    assert len(ident["entries"]) == 2 and ident["entries"][1]["cid"] == alice.head_cid
    first = await get_json(client, f"/content/{chain.content_id}/log?limit=2")
    assert first["cursor"] == chain.ops[1][0]
    rest = await get_json(
        client, f"/content/{chain.content_id}/log?after={first['cursor']}&limit=2"
    )
    assert [e["cid"] for e in rest["entries"]] == [cid for cid, _ in chain.ops[2:]]


async def test_paging_default_100_max_1000_and_cursor(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=113, start_ms=PAST_MS)
    alice = b.identity()
    for _ in range(149):
        b.artifact(alice)
    for i in range(0, len(b.tokens), 100):
        await post(client, b.tokens[i : i + 100])
    total = 152  # + the relay's own two ops
    first = await get_json(client, "/log")
    assert len(first["entries"]) == 100 and first["cursor"] == first["entries"][-1]["cid"]
    second = await get_json(client, f"/log?after={first['cursor']}")
    assert len(second["entries"]) == total - 100 and second["cursor"] is None
    everything = await get_json(client, "/log?limit=1000")
    assert len(everything["entries"]) == total and everything["cursor"] is None
    exact = await get_json(client, f"/log?limit={total}")
    assert exact["cursor"] in (None, exact["entries"][-1]["cid"])
    if exact["cursor"] is not None:  # a full page may not know it is the last
        assert (await get_json(client, f"/log?after={exact['cursor']}"))["entries"] == []
    small = await get_json(client, "/log?limit=7")
    assert [e["cid"] for e in small["entries"]] == [e["cid"] for e in first["entries"][:7]]
    # Artifacts are in the global log, not in their signer's identity chain log.
    chain_page = await get_json(client, f"/identities/{alice.did}/log?limit=1")
    assert [e["cid"] for e in chain_page["entries"]] == [alice.head_cid]
    assert chain_page["cursor"] is None


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=1001",
        "limit=abc",
        "limit=-1",
        "limit=1.5",
        "after=not-a-cid",
        "limit=",
        "limit=%C2%B2",  # a digit to str.isdigit, not to int()
        "limit=%D9%A3",  # an Arabic-Indic three: a decimal, but not ours
        "limit=" + "9" * 5000,  # too long a numeral for int(): a ValueError, not a 400
    ],
)
async def test_bad_paging_parameters_are_400(client: httpx.AsyncClient, query: str) -> None:
    response = await client.get(f"/log?{query}")
    assert response.status_code == 400 and "error" in response.json()


async def test_unknown_after_cursor_is_an_empty_page_marked_unknown(
    client: httpx.AsyncClient,
) -> None:
    # v0.7.1 wire: 200 with an empty last page. Additive: a header and a field
    # tell a follower its cursor means nothing here (so it resets, not stalls).
    b = WorkloadBuilder(seed=114, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    chain = b.content_create(alice)
    await post(client, b.tokens)
    unknown = "bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
    for path in (
        f"/log?after={unknown}",
        f"/identities/{alice.did}/log?after={bob.head_cid}",
        f"/content/{chain.content_id}/log?after={alice.head_cid}",
    ):
        response = await client.get(path)
        assert response.status_code == 200, path
        assert response.json() == {"entries": [], "cursor": None, "cursorUnknown": True}
        assert response.headers["x-dfos-cursor"] == "unknown"
    known = await client.get(f"/log?after={alice.head_cid}")
    assert "cursorUnknown" not in known.json() and "x-dfos-cursor" not in known.headers


async def test_chain_log_of_unknown_chain_is_404(client: httpx.AsyncClient) -> None:
    for path in (
        "/identities/did:dfos:nobodyhere000000000000/log",
        "/content/nothinghere0000000000/log",
    ):
        response = await client.get(path)
        assert response.status_code == 404 and "error" in response.json()


async def test_log_disabled_is_501_but_chain_logs_remain(store: RelayStore) -> None:
    relay = create_relay(store, log=False)
    async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
        response = await client.get("/log")
        assert response.status_code == 501 and "error" in response.json()
        log = await get_json(client, f"/identities/{relay.did}/log")
        assert len(log["entries"]) == 1
