"""Real relays of this project, in process, for the convergence tests.

``replicate`` is sync-in done by hand: it pages one relay's ``GET /log`` and
ingests the tokens into another relay, which is what peering's sync does.
It can become ``relay.sync_from_peers()`` once peering is wired in tests.
Dumps are written by ``relay.dumplog`` from each relay's HTTP log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from relay import Relay, create_relay
from relay.dumplog import dump_log


@dataclass
class Node:
    name: str
    relay: Relay
    client: httpx.AsyncClient

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


async def replicate(source: Node, target: Node) -> int:
    """Sync-in: replay the part of ``source``'s global log that ``target``
    lacks into ``target``; return how many entries were offered."""
    held = {e["cid"] for e in await target.log_tokens()}
    entries = [e for e in await source.log_tokens() if e["cid"] not in held]
    if entries:
        await target.relay.ingest([e["jwsToken"] for e in entries], source=source.name)
    return len(entries)


async def sync_until_stable(nodes: Sequence[Node], edges: Sequence[tuple[int, int]]) -> None:
    """Sync along ``edges`` (both directions) until no relay learns anything."""
    for _ in range(len(nodes) + 2):
        sizes = [len(await n.log_tokens()) for n in nodes]
        for a, b in edges:
            await replicate(nodes[a], nodes[b])
            await replicate(nodes[b], nodes[a])
        if sizes == [len(await n.log_tokens()) for n in nodes]:
            return


@asynccontextmanager
async def relays(n: int) -> AsyncIterator[list[Node]]:
    """``n`` relays over memory stores, each behind an in-process ASGI client."""
    async with AsyncExitStack() as stack:
        nodes = []
        for i in range(n):
            relay = create_relay()
            await stack.enter_async_context(relay.running())
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=relay.app), base_url="http://relay.test"
            )
            await stack.enter_async_context(client)
            nodes.append(Node(f"r{i}", relay, client))
        yield nodes
