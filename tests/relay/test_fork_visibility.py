"""Fork visibility (additive): ``GET /identities/{did}/tips`` and ``GET
/content/{id}/tips`` list every tip with its createdAt, which is the head
and why; ``GET .../log?branch=<cid>`` serves one branch from genesis to that
op, paged like the chain log (400 for an op outside the chain, 404 for an
unknown chain). In-process and over hypercorn, on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from relay.rules.forks import HEAD_RULE
from relay.testing.workload import ContentHandle, WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS, get_json, log_cids, post, statuses
from tests.support.served import TRANSPORTS, Served, served_relay


@pytest.fixture(params=TRANSPORTS)
async def served(store: RelayStore, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    async with served_relay(store, request.param) as s:
        yield s


async def branch_cids(served: Served, path: str, branch: str) -> list[str]:
    """Every CID of one branch, following the cursor two entries at a time."""
    cids: list[str] = []
    params = {"branch": branch, "limit": "2"}
    while True:
        response = await served.client.get(path, params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["branch"] == branch
        cids.extend(entry["cid"] for entry in page["entries"])
        if page["cursor"] is None:
            return cids
        params["after"] = page["cursor"]


def tip(cid: str, created_ms: int, head: bool) -> dict[str, Any]:
    return {"cid": cid, "createdAt": created_ms, "head": head}


async def forked_content(served: Served, seed: int) -> tuple[ContentHandle, list[str]]:
    """genesis -> u1 -> u2, and a later fork from genesis: [genesis, u1, u2, fork]."""
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    u1 = b.content_update(chain)
    u2 = b.content_update(chain)
    fork = b.content_update(chain, parent=chain.ops[0])
    assert statuses(await post(served.client, b.tokens)) == ["new"] * 5
    return chain, [chain.genesis_cid, u1, u2, fork]


async def test_content_tips_name_the_head_and_why(served: Served) -> None:
    chain, [genesis, _, u2, fork] = await forked_content(served, 181)
    ms = dict(chain.ops)
    tips = await get_json(served.client, f"/content/{chain.content_id}/tips")
    assert tips == {
        "contentId": chain.content_id,
        "genesisCID": genesis,
        "headCID": fork,
        "headRule": HEAD_RULE,
        "headReason": "latest-createdAt",
        "forked": True,
        "tips": [tip(u2, ms[u2], False), tip(fork, ms[fork], True)],
    }
    content = await get_json(served.client, f"/content/{chain.content_id}")
    assert content["headCID"] == tips["headCID"]


async def test_a_created_at_tie_is_said_to_break_on_the_cid(served: Served) -> None:
    b = WorkloadBuilder(seed=182, start_ms=PAST_MS)
    alice = b.identity()
    chain = b.content_create(alice)
    tie_ms = chain.head_ms + 10_000
    first = b.content_update(chain, parent=chain.ops[0], created_ms=tie_ms)
    second = b.content_update(chain, parent=chain.ops[0], created_ms=tie_ms)
    await post(served.client, b.tokens)
    tips = await get_json(served.client, f"/content/{chain.content_id}/tips")
    low, high = sorted([first, second])
    assert tips["tips"] == [tip(low, tie_ms, False), tip(high, tie_ms, True)]
    assert (tips["headCID"], tips["headReason"]) == (high, "createdAt-tie-highest-cid")


async def test_identity_tips_unforked_then_forked(served: Served) -> None:
    b = WorkloadBuilder(seed=183, start_ms=PAST_MS)
    alice = b.identity()
    genesis, genesis_ms, genesis_key = alice.head_cid, alice.head_ms, alice.keypair
    rotated = b.rotate(alice)
    await post(served.client, b.tokens)
    tips = await get_json(served.client, f"/identities/{alice.did}/tips")
    assert tips == {
        "did": alice.did,
        "headCID": rotated,
        "headRule": HEAD_RULE,
        "headReason": "only-tip",
        "forked": False,
        "tips": [tip(rotated, alice.head_ms, True)],
    }
    rotated_ms = alice.head_ms
    alice.head_cid, alice.head_ms, alice.keypair = genesis, genesis_ms, genesis_key
    other = b.rotate(alice)  # a second branch from genesis, later
    await post(served.client, b.tokens[-1:])
    tips = await get_json(served.client, f"/identities/{alice.did}/tips")
    assert tips["tips"] == [tip(rotated, rotated_ms, False), tip(other, alice.head_ms, True)]
    assert (tips["headCID"], tips["forked"]) == (other, True)
    branch = await branch_cids(served, f"/identities/{alice.did}/log", rotated)
    assert branch == [genesis, rotated]


async def test_a_branch_log_runs_from_genesis_to_the_tip(served: Served) -> None:
    chain, [genesis, u1, u2, fork] = await forked_content(served, 184)
    path = f"/content/{chain.content_id}/log"
    assert await branch_cids(served, path, u2) == [genesis, u1, u2]
    assert await branch_cids(served, path, fork) == [genesis, fork]
    assert await branch_cids(served, path, u1) == [genesis, u1]
    assert await branch_cids(served, path, genesis) == [genesis]
    assert await log_cids(served.client, path) == [genesis, u1, u2, fork]  # unchanged
    first = await get_json(served.client, f"{path}?branch={u2}&limit=2")
    assert [e["cid"] for e in first["entries"]] == [genesis, u1]
    assert first["cursor"] == u1 and first["branch"] == u2
    assert first["entries"][0]["jwsToken"].count(".") == 2
    rest = await get_json(served.client, f"{path}?branch={u2}&limit=2&after={u1}")
    assert ([e["cid"] for e in rest["entries"]], rest["cursor"]) == ([u2], None)
    # a cursor from the other branch is not in this one
    off = await get_json(served.client, f"{path}?branch={u2}&after={fork}")
    assert off == {"entries": [], "cursor": None, "cursorUnknown": True}


async def test_branch_and_tips_refuse_bad_input(served: Served) -> None:
    chain, _ = await forked_content(served, 185)
    elsewhere, [other_genesis, *_] = await forked_content(served, 186)
    unknown = WorkloadBuilder(seed=187, start_ms=PAST_MS).identity()
    client = served.client
    for path, status in [
        (f"/content/{chain.content_id}/log?branch=nope", 400),
        (f"/content/{chain.content_id}/log?branch={other_genesis}", 400),
        (f"/content/{chain.content_id}/log?branch={other_genesis}&limit=0", 400),
        (f"/content/{elsewhere.content_id[:-1]}x/log?branch={other_genesis}", 404),
        (f"/content/{elsewhere.content_id[:-1]}x/tips", 404),
        (f"/identities/{unknown.did}/tips", 404),
        (f"/identities/{unknown.did}/log?branch={unknown.head_cid}", 404),
        (f"/content/{chain.creator.did}/tips", 404),  # a DID is no content chain
        (f"/identities/{chain.content_id}/tips", 404),
    ]:
        response = await client.get(path)
        assert response.status_code == status, path
        assert "error" in response.json()
