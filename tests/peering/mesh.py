"""Meshes of real relays for the peering tests, and how to compare them.

``in_process_mesh`` wires relays through ``AsgiMeshTransport`` (one shared
``HttpPeerClient``); each relay is started with ``relay.running()`` because
ASGI transports do not run lifespans. Comparisons go through each relay's
HTTP API (GET /log, GET /identities/:did, GET /content/:id).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from peer import AsgiMeshTransport, PeerConfig
from peer.base import LOCAL_ONLY_HEADER
from peer.sync_http import HttpSyncClient
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from tests.support.backends import make_store

FAST = PeeringConfig(backoff_base_s=0.01, backoff_max_s=0.05, gossip_flush_timeout_s=5.0)


@dataclass
class Mesh:
    urls: list[str]
    relays: list[Relay]
    transport: AsgiMeshTransport
    http: httpx.AsyncClient  # talks to any relay by absolute URL

    def peering(self, i: int) -> Peering:
        p = self.relays[i].peering
        assert isinstance(p, Peering)
        return p

    async def settle_gossip(self) -> None:
        """Until every forward and gossip queue of every relay is empty
        (three passes: a push can cause forwards and echoes)."""
        for _ in range(3):
            for i in range(len(self.relays)):
                await self.peering(i).flushed()

    async def resolve_peers(self) -> None:
        """Every relay reads its peers' well-known documents now (DIDs and
        advertised peers), instead of waiting for the directory task."""
        for i in range(len(self.relays)):
            await self.peering(i).directory.refresh()

    def index_of_did(self, did: str | None) -> int | None:
        for i, relay in enumerate(self.relays):
            if relay.did == did:
                return i
        return None


def mesh_urls(n: int) -> list[str]:
    return [f"http://relay-{chr(97 + i)}.test" for i in range(n)]


def full_mesh_peers(urls: Sequence[str], me: str, **flags: bool) -> list[PeerConfig]:
    return [PeerConfig(u, **flags) for u in urls if u != me]


@asynccontextmanager
async def in_process_mesh(
    tmp_path: Path,
    n: int = 3,
    *,
    backend: str = "memory",
    config: PeeringConfig = FAST,
    peers: dict[int, list[PeerConfig]] | None = None,
    record_posts: bool = False,
    **flags: bool,
) -> AsyncIterator[Mesh]:
    """``n`` started relays; by default a full mesh with ``flags`` per peer.
    ``record_posts``: the transport keeps every POST /operations."""
    urls = mesh_urls(n)
    transport = AsgiMeshTransport(record_posts=record_posts)
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx.AsyncClient(transport=transport))
        client = HttpSyncClient(http)
        relays = []
        for i, url in enumerate(urls):
            store_dir = tmp_path / f"r{i}"
            store_dir.mkdir(exist_ok=True)
            store = await stack.enter_async_context(make_store(backend, store_dir))
            mine = (peers or {}).get(i, full_mesh_peers(urls, url, **flags))
            relay = create_relay(store, peering=build_peering(mine, client, config))
            transport.mount(url, relay.app)
            relays.append(relay)
        for relay in relays:
            await stack.enter_async_context(relay.running())
        yield Mesh(urls, relays, transport, http)


# -- comparisons ------------------------------------------------------------------


def shuffled(tokens: Sequence[str], seed: int) -> list[str]:
    out = list(tokens)
    random.Random(seed).shuffle(out)
    return out


async def post_all(http: httpx.AsyncClient, url: str, tokens: Sequence[str]) -> None:
    """POST in batches of 100 (the API limit), asserting nothing was rejected
    except dependency waits that the later batches resolve."""
    for start in range(0, len(tokens), 100):
        response = await http.post(
            url + "/operations", json={"operations": list(tokens[start : start + 100])}
        )
        assert response.status_code == 200, response.text


async def global_log(http: httpx.AsyncClient, url: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after"] = after
        response = await http.get(url + "/log", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        entries.extend(body["entries"])
        after = body["cursor"]
        if after is None:
            return entries


def chains_of(entries: Sequence[dict[str, Any]]) -> dict[str, str]:
    """chainId -> "identity" | "content" for every chain in a global log."""
    out: dict[str, str] = {}
    for e in entries:
        if e["kind"] == "identity-op":
            out[e["chainId"]] = "identity"
        elif e["kind"] == "content-op":
            out[e["chainId"]] = "content"
    return out


async def heads(http: httpx.AsyncClient, url: str, chains: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for chain_id, kind in chains.items():
        path = f"/identities/{chain_id}" if kind == "identity" else f"/content/{chain_id}"
        response = await http.get(url + path, headers={LOCAL_ONLY_HEADER: "1"})
        out[chain_id] = response.json()["headCID"] if response.status_code == 200 else "404"
    return out


async def assert_converged(mesh: Mesh, only: set[str] | None = None) -> set[str]:
    """Same op CIDs in every GET /log, same head for every chain everywhere."""
    logs = [await global_log(mesh.http, url) for url in mesh.urls]
    sets = [{e["cid"] for e in log} for log in logs]
    if only is not None:
        sets = [s & only for s in sets]
    for url, s in zip(mesh.urls[1:], sets[1:], strict=True):
        missing, extra = sets[0] - s, s - sets[0]
        assert not missing and not extra, f"{url}: {len(missing)} missing, {len(extra)} extra"
    chains: dict[str, str] = {}
    for log in logs:
        chains.update(chains_of([e for e in log if only is None or e["cid"] in only]))
    first = await heads(mesh.http, mesh.urls[0], chains)
    assert "404" not in first.values()
    for url in mesh.urls[1:]:
        assert await heads(mesh.http, url, chains) == first, url
    return sets[0]
