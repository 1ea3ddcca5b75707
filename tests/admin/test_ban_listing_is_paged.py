"""``GET /admin/bans`` answers a bounded page (``limit``, default 100, at
most 1000) of bans by DID and a cursor while more follow; ``after`` (a DID)
reads the next page. Each ban carries its purge's counts, read for the
page's DIDs only."""

from __future__ import annotations

from relay.testing.workload import WorkloadBuilder

from .conftest import World


async def test_bans_are_listed_a_page_at_a_time(world: World) -> None:
    others = WorkloadBuilder(seed=17)
    dids = sorted(others.identity().did for _ in range(5))
    for did in dids:
        assert (await world.admin("PUT", f"/admin/bans/{did}", {})).status_code == 200
    seen: list[str] = []
    cursor: str | None = None
    while True:
        query = "?limit=2" + (f"&after={cursor}" if cursor else "")
        page = (await world.admin("GET", "/admin/bans" + query)).json()
        assert len(page["bans"]) <= 2
        seen += [ban["did"] for ban in page["bans"]]
        cursor = page["cursor"]
        if cursor is None:
            break
        assert cursor == seen[-1]
    assert seen == dids
    whole = (await world.admin("GET", "/admin/bans")).json()
    assert [ban["did"] for ban in whole["bans"]] == dids and whole["cursor"] is None
    assert whole["bans"][0]["purged"] == {"operations": 0, "byKind": {}}


async def test_a_bad_limit_or_cursor_is_a_400(world: World) -> None:
    for query in ("limit=0", "limit=1001", "limit=abc", "after=not-a-did"):
        response = await world.admin("GET", f"/admin/bans?{query}")
        assert response.status_code == 400, (query, response.text)
