"""What a relay owes its healthy peers while a hostile one holds
connections: gossip reaches the healthy gossip peer, and a read-through and
a sync from the healthy source are answered at once."""

from __future__ import annotations

import asyncio
import time

import httpx

from relay import Relay
from tests.support.relay_api import log_cids


async def healthy_peers_are_served(
    relay: Relay,
    http: httpx.AsyncClient,
    gossiped_to: httpx.AsyncClient,
    gossiped: int,
    source: Relay,
    synced: int,
) -> None:
    """``gossiped`` ops reach the peer behind ``gossiped_to`` within 15 s;
    then an identity of ``source`` (a read-through and sync peer holding
    ``synced`` ops) is read through, and a sync pulls, within 2 s."""
    started = time.monotonic()
    while len(await log_cids(gossiped_to)) < gossiped:
        assert time.monotonic() - started < 15, "gossip to the healthy peer starved"
        await asyncio.sleep(0.1)
    started = time.monotonic()
    entries = await source.store.read_seq_range(0, synced, synced)
    did = next(e.chain_id for e in entries if e.kind == "identity-op")
    assert (await http.get(f"/identities/{did}")).status_code == 200  # read through
    assert await relay.sync_from_peers() > 0
    assert time.monotonic() - started < 2.0, "read-through and sync waited for the pool"
