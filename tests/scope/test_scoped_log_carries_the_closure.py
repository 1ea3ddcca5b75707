"""``GET /log?scope=`` serves the effective scope: the intent plus its
dependency closure, each op after what it depends on, and nothing else."""

from __future__ import annotations

from typing import Any

import httpx

from relay import Relay

from .world import build_world, expected_closure


async def scoped_log(
    client: httpx.AsyncClient, scope: str, limit: int = 100
) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    after = None
    for _ in range(1000):
        query = f"scope={scope}&limit={limit}" + (f"&after={after}" if after else "")
        page = (await client.get(f"/log?{query}")).json()
        entries.extend(page["entries"])
        after = page["cursor"]
        if after is None:
            return entries
    raise AssertionError("the scoped log did not end")


def assert_dependencies_first(entries: list[dict[str, Any]]) -> None:
    """Every identity an op needs appears (its genesis) before the op."""
    seen_identities: set[str] = set()
    for entry in entries:
        if entry["kind"] == "identity-op":
            seen_identities.add(entry["chainId"])
        elif entry["kind"] in ("content-op", "countersign"):
            from relay.protocol import decode_jws

            signer = str(decode_jws(entry["jwsToken"]).header["kid"]).split("#")[0]
            assert signer in seen_identities, (entry["kind"], signer)


async def test_a_content_scope_carries_creator_signers_and_witnesses(
    relay: Relay, client: httpx.AsyncClient
) -> None:
    world = build_world()
    await relay.ingest(world.tokens)
    entries = await scoped_log(client, world.chain.content_id)
    assert {(e["kind"], e["chainId"]) for e in entries} == expected_closure(world)
    assert len({e["cid"] for e in entries}) == len(entries)
    assert world.delegate_op in {e["cid"] for e in entries}
    assert world.countersign in {e["cid"] for e in entries}
    assert_dependencies_first(entries)


async def test_paging_one_entry_at_a_time_gives_the_same_entries(
    relay: Relay, client: httpx.AsyncClient
) -> None:
    world = build_world(seed=8)
    await relay.ingest(world.tokens)
    whole = await scoped_log(client, world.chain.content_id)
    paged = await scoped_log(client, world.chain.content_id, limit=1)
    assert [e["cid"] for e in paged] == [e["cid"] for e in whole]


async def test_a_did_scope_holds_its_identity_beacons_and_artifacts(
    relay: Relay, client: httpx.AsyncClient
) -> None:
    world = build_world(seed=9)
    await relay.ingest(world.tokens)
    entries = await scoped_log(client, world.creator.did)
    assert {e["chainId"] for e in entries} == {world.creator.did}
    assert {e["kind"] for e in entries} == {"identity-op", "beacon", "artifact"}
    assert set(world.creator_extras) <= {e["cid"] for e in entries}


async def test_an_unknown_cursor_is_reported_as_on_the_unscoped_log(
    relay: Relay, client: httpx.AsyncClient
) -> None:
    world = build_world(seed=10)
    await relay.ingest(world.tokens)
    unknown = world.chain.genesis_cid[:-4] + "aaaa"
    page = (await client.get(f"/log?scope={world.creator.did}&after={unknown}")).json()
    assert page["entries"] == [] and page["cursor"] is None
