"""A purge may remove a chain between a read route's lookup of the chain and
its read of the chain's ops: the tips, branch-log and DID-resolution routes
then answer 404 (the chain is gone), never a 500 or a 400 that blames the
client's branch. Reads run concurrently with a real purge, on every store."""

from __future__ import annotations

import asyncio
from collections import Counter

from tests.admin.conftest import World

READERS_PER_ROUTE = 3


async def test_reads_racing_a_purge_answer_200_or_404(world: World) -> None:
    b, alice = world.builder, world.alice
    start = len(b.tokens)
    chain = b.content_create(alice)
    b.content_update(chain)
    assert {r["status"] for r in await world.post(b.tokens[start:])} == {"new"}
    routes = [
        f"/content/{chain.content_id}/tips",
        f"/identities/{alice.did}/tips",
        f"/1.0/identifiers/{alice.did}",
        f"/content/{chain.content_id}/log?branch={chain.head_cid}",
        f"/identities/{alice.did}/log?branch={alice.head_cid}",
    ]
    answers: Counter[tuple[str, int]] = Counter()
    purged = asyncio.Event()

    async def read(path: str) -> None:
        while not purged.is_set():
            await asyncio.sleep(0)  # the in-memory store never suspends on its own
            answers[path, (await world.client.get(path)).status_code] += 1

    readers = [asyncio.create_task(read(p)) for p in routes * READERS_PER_ROUTE]
    await asyncio.sleep(0.2)
    banned = await world.admin("PUT", f"/admin/bans/{alice.did}", {"purge": True})
    assert banned.status_code == 200, banned.text
    await asyncio.sleep(0.2)
    purged.set()
    await asyncio.gather(*readers)
    assert {status for _, status in answers} <= {200, 404}, answers
    for path in routes:  # each route was read on both sides of the purge
        assert answers[path, 200] and answers[path, 404], (path, answers)
