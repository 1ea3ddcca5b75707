"""Bans are judged under the sequencing lock by the store's bans, not by a
worker's cached copy: right after a ban with purge made through one
process, another process sharing the store (its cache read well within
``BAN_REFRESH_S``) refuses the banned DID's ops, its identity genesis sent
again included, as ``banned``, with the reason; the purge is not undone. A
plain ban, and its lifting, reach the other process's next batch."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relay import Relay, create_relay
from relay.config import RelayConfig
from relay.ingest.policy import signer_of_token
from relay.rules.outcomes import IngestionResult, RejectReason, Status
from stores.base import RelayStore
from stores.memory import MemoryStore
from tests.admin.conftest import World
from tests.admin.test_bans import ban
from tests.stores.conftest import reopen


@pytest.fixture
async def other(store: RelayStore) -> AsyncIterator[Relay]:
    """Another worker on the world's store, its bans cached before the test's."""
    if isinstance(store, MemoryStore):
        pytest.skip("a memory store is shared by no other process")
    relay = create_relay(reopen(store), config=RelayConfig())
    async with relay.running():
        yield relay


def _banned(results: list[IngestionResult], reason: str) -> bool:
    """Every one refused as ``banned`` on this relay, with the ban's reason."""
    return all(
        r.reason is RejectReason.BANNED and f"is banned on this relay ({reason})" in (r.error or "")
        for r in results
    )


async def test_a_purged_did_does_not_come_back_through_another_process(
    world: World, store: RelayStore, other: Relay
) -> None:
    alice = world.alice
    # every op the relay holds (alice's identity genesis among them), and a new one
    lines = [*world.builder.tokens, world.beacon(alice)]
    await ban(world, alice.did, reason="abuse", purge=True)
    results = await other.ingest(lines)
    assert await store.get_chain(alice.did) is None
    assert await store.list_purged(alice.did)  # the purge stands
    signers = [signer_of_token(r.cid, token) for r, token in zip(results, lines, strict=True)]
    alices = [r for r, signer in zip(results, signers, strict=True) if signer == alice.did]
    assert len(alices) >= 2 and _banned(alices, "abuse")
    others = {r.status for r, signer in zip(results, signers, strict=True) if signer != alice.did}
    assert others == {Status.DUPLICATE}


async def test_a_ban_and_its_lifting_reach_another_process_at_its_next_batch(
    world: World, other: Relay
) -> None:
    alice = world.alice
    await ban(world, alice.did, reason="spam")
    assert _banned(await other.ingest([world.beacon(alice)]), "spam")
    await other.bans.refresh()  # its cache holds the ban now: lifted, the store wins
    response = await world.admin("DELETE", f"/admin/bans/{alice.did}")
    assert response.status_code == 200
    assert [r.status for r in await other.ingest([world.beacon(alice)])] == [Status.NEW]
