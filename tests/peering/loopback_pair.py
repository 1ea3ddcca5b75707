"""Two real relays served by hypercorn on loopback, peered by gossip only
(no sync, read-through or reconciliation: an op one of them is not pushed
stays missing), for the sender-proof tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from peer import HttpPeerClient, PeerConfig
from relay import Relay, create_relay
from relay.peering.service import Peering, build_peering
from relay.testing.server import free_port, serve_on_loopback
from tests.peering.mesh import FAST
from tests.support.backends import make_store


@dataclass
class Pair:
    urls: list[str]
    relays: list[Relay]

    def peering(self, i: int) -> Peering:
        p = self.relays[i].peering
        assert isinstance(p, Peering)
        return p

    async def settle(self) -> None:
        for _ in range(2):
            for i in range(len(self.relays)):
                await self.peering(i).flushed()

    async def missing_at(self, i: int, cids: Sequence[str]) -> list[str]:
        store = self.relays[i].store
        return [cid for cid in cids if await store.get_operation(cid) is None]


@asynccontextmanager
async def loopback_pair(
    tmp_path: Path, gossips_to: Sequence[Sequence[int]] = ((1,), (0,))
) -> AsyncIterator[Pair]:
    """Relays 0 and 1; relay i gossips to the relays in ``gossips_to[i]``.
    Each has read its peers' well-known documents and pushed its start-up
    ops before this yields."""
    ports = [free_port() for _ in range(2)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    async with AsyncExitStack() as stack:
        client = HttpPeerClient(await stack.enter_async_context(httpx.AsyncClient(timeout=10)))
        relays = []
        for i, port in enumerate(ports):
            (tmp_path / f"r{i}").mkdir()
            store = await stack.enter_async_context(make_store("sqlite", tmp_path / f"r{i}"))
            peers = [
                PeerConfig(urls[j], gossip=True, read_through=False, sync=False)
                for j in gossips_to[i]
            ]
            relay = create_relay(store, peering=build_peering(peers, client, FAST))
            await stack.enter_async_context(serve_on_loopback(relay.app, port))
            relays.append(relay)
        pair = Pair(urls, relays)
        for i in range(2):
            await pair.peering(i).directory.refresh()
        await pair.settle()
        yield pair


def unproven(relay: Relay, reason: str) -> float:
    """The relay's ``dfos_relay_peer_pushes_unproven_total{reason}``."""
    value = relay.metrics.registry.get_sample_value(
        "dfos_relay_peer_pushes_unproven_total", {"reason": reason}
    )
    return value or 0.0
