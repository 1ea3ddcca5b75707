"""Real relays of this project, in process and peered, for the convergence tests.

Relays converge by their own peering: each one is configured with sync-in
peers (``PeerConfig(sync=True)``; no gossip, no read-through) and
``sync_until_stable`` runs ``relay.sync_from_peers()`` on every relay in
rounds. Nothing is copied between relays by the tests.

Each relay reaches its peers through its own ``AsgiMeshTransport`` (every
relay's app mounted), so a link can be cut on one relay without touching
the others: ``cut`` downs each end's URL on the other end's transport,
``heal`` brings it back. Dumps are written by ``relay.dumplog`` from each
relay's HTTP log, through a plain in-process client that is never cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from peer import AsgiMeshTransport, HttpPeerClient, PeerConfig
from relay import Relay, create_relay
from relay.dumplog import dump_log
from relay.peering.service import build_peering
from tests.peering.mesh import FAST

Edge = tuple[int, int]


@dataclass
class Node:
    name: str
    url: str  # where its peers reach it
    relay: Relay
    client: httpx.AsyncClient  # the tests' own client: POSTs, reads, dumps
    transport: AsgiMeshTransport  # how this relay reaches its peers

    async def post(self, tokens: Sequence[str]) -> None:
        response = await self.client.post("/operations", json={"operations": list(tokens)})
        assert response.status_code == 200, response.text

    async def log_tokens(self) -> list[dict[str, str]]:
        entries: list[dict[str, str]] = []
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": 1000}
            if after is not None:
                params["after"] = after
            page = (await self.client.get("/log", params=params)).json()
            entries.extend(page["entries"])
            if page["cursor"] is None or not page["entries"]:
                return entries
            after = page["cursor"]

    async def dump(self, directory: Path, suffix: str = ".jsonl") -> Path:
        path = directory / f"{self.name}{suffix}"
        await dump_log(self.client, "http://relay.test", path, resume=False)
        return path

    async def head(self, kind: str, chain_id: str) -> str | None:
        route = "identities" if kind == "identity-op" else "content"
        response = await self.client.get(f"/{route}/{chain_id}")
        return response.json()["headCID"] if response.status_code == 200 else None


def full_mesh(n: int) -> list[Edge]:
    return [(a, b) for a in range(n) for b in range(a + 1, n)]


def peers_of(i: int, urls: Sequence[str], edges: Iterable[Edge]) -> list[PeerConfig]:
    """Sync-only peers of relay ``i``: every relay an edge links it to."""
    linked = sorted({b if a == i else a for a, b in edges if i in (a, b)})
    return [PeerConfig(urls[j], gossip=False, read_through=False, sync=True) for j in linked]


async def sync_until_stable(nodes: Sequence[Node]) -> None:
    """Peering sync-in on every relay, in rounds, until a round sequences
    nothing. A change spreads at least one hop per round, so n+2 rounds
    suffice for any connected topology; more means something is wrong."""
    for _ in range(len(nodes) + 2):
        if sum([await n.relay.sync_from_peers() for n in nodes]) == 0:
            return
    raise AssertionError(f"{len(nodes)} relays still sequencing after {len(nodes) + 2} rounds")


def cut(nodes: Sequence[Node], links: Iterable[Edge]) -> None:
    """Each end of each link stops reaching the other (peer unreachable)."""
    for a, b in links:
        nodes[a].transport.down(nodes[b].url)
        nodes[b].transport.down(nodes[a].url)


async def heal(nodes: Sequence[Node], links: Iterable[Edge]) -> None:
    """Reconnect ``links``, then wait out the backoff the cut left behind:
    a backed-off peer is skipped by sync, which would look like stability."""
    for a, b in links:
        nodes[a].transport.up(nodes[b].url)
        nodes[b].transport.up(nodes[a].url)
    await asyncio.sleep(FAST.backoff_max_s * 2)


def crossing(edges: Iterable[Edge], side: dict[int, bool]) -> list[Edge]:
    """The links of ``edges`` a partition into ``side`` cuts."""
    return [(a, b) for a, b in edges if side[a] != side[b]]


@asynccontextmanager
async def relays(n: int, edges: Sequence[Edge] | None = None) -> AsyncIterator[list[Node]]:
    """``n`` started relays over memory stores, peered (sync-in) along
    ``edges`` (default: full mesh)."""
    links = full_mesh(n) if edges is None else edges
    urls = [f"http://r{i}.test" for i in range(n)]
    async with AsyncExitStack() as stack:
        transports = [AsgiMeshTransport() for _ in range(n)]
        nodes = []
        for i, transport in enumerate(transports):
            http = await stack.enter_async_context(httpx.AsyncClient(transport=transport))
            peering = build_peering(peers_of(i, urls, links), HttpPeerClient(http), FAST)
            relay = create_relay(peering=peering)
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=relay.app), base_url="http://relay.test"
            )
            await stack.enter_async_context(client)
            nodes.append(Node(f"r{i}", urls[i], relay, client, transport))
        for transport in transports:  # every relay can address every other
            for node in nodes:
                transport.mount(node.url, node.relay.app)
        for node in nodes:  # ASGI transports run no lifespans
            await stack.enter_async_context(node.relay.running())
        yield nodes


def one_relay_dump(out: Path, seed: int) -> Path:
    """The dump, in ``out``, of one relay given the ops of ``story(1, seed)``."""
    from .scenarios import story

    tokens = story(1, seed=seed).take()

    async def build() -> Path:
        async with relays(1) as (node,):
            await node.post(tokens)
            return await node.dump(out)

    return asyncio.run(build())
