"""An in-process mesh of N real relays, for tests and ``bench/mesh.py``.

Every relay runs on a memory store and is mounted on ONE shared
``AsgiMeshTransport``. Each relay reaches its peers through its own
``HttpSyncClient`` whose transport is a ``RecordingTransport``: a thin
wrapper that knows the sending relay, records every POST /operations
(sender, receiver, the receiver's answer per op CID) and refuses the links a
partition cuts (a relay taken down with ``transport.down`` is unreachable for
everyone). Nothing of the relay is replaced: gossip, fan-out (when the build
has it) and reconciliation run as in production.

The harness's own client (client writes to entry relays, reads, dumps) goes
through the shared transport directly: it is never recorded and never cut.

Not simulated: time. Gossip runs as fast as the event loop does; latency is
counted in hops ("rounds"), not seconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from peer import AsgiMeshTransport, PeerConfig
from peer.base import FANOUT_HOP_HEADER
from peer.sync_http import HttpSyncClient
from relay import Relay, create_relay
from relay.dumplog import dump_log
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.protocol import decode_jws

from .mesh_stats import Push

HOP_HEADER = FANOUT_HOP_HEADER
DIRECT = 10**6  # fanout_direct_max that keeps direct push to every peer


def has_fanout() -> bool:
    """Whether this build's ``PeeringConfig`` knows rendezvous fan-out."""
    return "fanout_direct_max" in _fields()


def _fields() -> set[str]:
    return {f.name for f in dataclasses.fields(PeeringConfig)}


def has_discovery() -> bool:
    """Whether this build's relays can learn peers of peers."""
    return {"peer_discovery", "directory_refresh_s"} <= _fields()


def sim_config(fanout: bool, discovery_refresh_s: float | None = None) -> PeeringConfig:
    """Fast backoff (a cut link costs milliseconds, not minutes), no
    periodic reconcile (the harness heals explicitly), and fan-out or direct
    push when the build can tell them apart. ``discovery_refresh_s``: learn
    peers of peers (the build's opt-in discovery), re-reading peers' well-known
    documents that often; a build without discovery raises ``ValueError``."""
    extra: dict[str, Any] = {}
    if has_fanout():
        extra["fanout_direct_max"] = 4 if fanout else DIRECT
    if discovery_refresh_s is not None:
        if not has_discovery():
            raise ValueError("this build has no peer discovery (PeeringConfig.peer_discovery)")
        extra |= {"peer_discovery": True, "directory_refresh_s": discovery_refresh_s}
    return PeeringConfig(
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        gossip_flush_timeout_s=5.0,
        reconcile_interval_s=None,
        **extra,
    )


@dataclass
class Recorder:
    """Pushes seen by every ``RecordingTransport``, and the partition."""

    index: dict[str, int]  # relay origin URL -> relay index
    phase: str = "gossip"
    side: dict[int, bool] | None = None  # a partition: links across sides are cut
    pushes: list[Push] = field(default_factory=list)

    def cut(self, sender: int, receiver: int) -> bool:
        return self.side is not None and self.side[sender] != self.side[receiver]


class RecordingTransport(httpx.AsyncBaseTransport):
    """Relay ``sender``'s way to its peers over the shared transport."""

    def __init__(self, sender: int, inner: AsgiMeshTransport, recorder: Recorder) -> None:
        self._sender = sender
        self._inner = inner
        self._rec = recorder

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = f"{request.url.scheme}://{request.url.host}"
        receiver = self._rec.index.get(origin)
        is_push = request.method == "POST" and request.url.path == "/operations"
        if receiver is not None and self._rec.cut(self._sender, receiver):
            if is_push:
                self._record(request, receiver, None)
            raise httpx.ConnectError(f"partitioned from {origin}", request=request)
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError:
            if is_push and receiver is not None:
                self._record(request, receiver, None)
            raise
        if not (is_push and receiver is not None):
            return response
        body = await response.aread()
        self._record(request, receiver, body if response.status_code == 200 else None)
        return httpx.Response(response.status_code, headers=response.headers, content=body)

    def _record(self, request: httpx.Request, receiver: int, body: bytes | None) -> None:
        answers: dict[str, str] = {}
        if body is not None:
            for r in json.loads(body).get("results", []):
                answers[r["cid"]] = r.get("reason") or r["status"]
        else:  # unreachable: the CIDs are in the request, with no answer
            for token in json.loads(request.content).get("operations", []):
                answers[_cid_of(token)] = "unreachable"
        self._rec.pushes.append(
            Push(
                self._sender,
                receiver,
                self._rec.phase,
                body is not None,
                answers,
                request.headers.get(HOP_HEADER),
            )
        )


def _cid_of(token: str) -> str:
    return str(decode_jws(token).header_cid)


@dataclass
class SimMesh:
    urls: list[str]
    relays: list[Relay]
    peers: list[list[int]]  # gossip peers of each relay
    transport: AsgiMeshTransport
    recorder: Recorder
    http: httpx.AsyncClient  # the harness's client: any relay by absolute URL

    def peering(self, i: int) -> Peering:
        p = self.relays[i].peering
        assert isinstance(p, Peering)
        return p

    async def post(self, i: int, tokens: Sequence[str]) -> None:
        """A client write of ``tokens`` (<= 100) to relay ``i``."""
        response = await self.http.post(
            self.urls[i] + "/operations", json={"operations": list(tokens)}
        )
        response.raise_for_status()

    async def settle(self) -> None:
        """Until every gossip queue (and fan-out forward queue, when the build
        has one) is empty and two whole passes in a row pushed nothing."""
        quiet = 0
        for _ in range(100):
            before = len(self.recorder.pushes)
            for i in range(len(self.relays)):
                peering = self.peering(i)
                await peering.gossip.flushed()
                fanout = getattr(peering, "fanout", None)
                if fanout is not None and hasattr(fanout, "flushed"):
                    await fanout.flushed()
            await asyncio.sleep(0.01)
            quiet = quiet + 1 if len(self.recorder.pushes) == before else 0
            if quiet == 2:
                return

    def lane_counts(self) -> list[int]:
        """Each relay's gossip peers now (discovery adds lanes as it learns)."""
        return [len(self.peering(i).gossip.lanes) for i in range(len(self.relays))]

    async def discovered(self, timeout_s: float = 60.0) -> list[int]:
        """Wait until every relay gossips to every other (peer discovery has
        run its course) or ``timeout_s`` passed; return the lane counts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline and min(self.lane_counts()) < len(self.relays) - 1:
            await asyncio.sleep(0.05)
        return self.lane_counts()

    async def holdings(self) -> list[set[str]]:
        """The op CIDs in each relay's GET /log (the relay's own view)."""
        return [await _log_cids(self.http, url) for url in self.urls]

    async def dump(self, directory: Path) -> list[str]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for i, url in enumerate(self.urls):
            path = directory / f"r{i:02d}.jsonl"
            await dump_log(self.http, url, path, resume=False)
            paths.append(str(path))
        return paths


async def _log_cids(http: httpx.AsyncClient, url: str) -> set[str]:
    cids: set[str] = set()
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after"] = after
        page = (await http.get(url + "/log", params=params)).raise_for_status().json()
        cids.update(e["cid"] for e in page["entries"])
        after = page["cursor"]
        if after is None or not page["entries"]:
            return cids


@asynccontextmanager
async def sim_mesh(peers: list[list[int]], config: PeeringConfig) -> AsyncIterator[SimMesh]:
    """Started relays, relay ``i`` gossiping to ``peers[i]`` (no sync-in,
    no read-through: only gossip moves ops until the harness reconciles)."""
    n = len(peers)
    urls = [f"http://m{i:02d}.test" for i in range(n)]
    transport = AsgiMeshTransport()
    recorder = Recorder({url: i for i, url in enumerate(urls)})
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx.AsyncClient(transport=transport))
        relays = []
        for i in range(n):
            wrapped = RecordingTransport(i, transport, recorder)
            client = await stack.enter_async_context(httpx.AsyncClient(transport=wrapped))
            mine = [
                PeerConfig(urls[j], gossip=True, read_through=False, sync=False) for j in peers[i]
            ]
            relay = create_relay(peering=build_peering(mine, HttpSyncClient(client), config))
            transport.mount(urls[i], relay.app)
            relays.append(relay)
        for relay in relays:  # ASGI transports run no lifespans
            await stack.enter_async_context(relay.running())
        mesh = SimMesh(urls, relays, peers, transport, recorder, http)
        await mesh.settle()  # the relays' own announcements
        recorder.pushes.clear()
        yield mesh
