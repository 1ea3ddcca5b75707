"""Three relays over real sockets: hypercorn on loopback in this process,
and three separate OS processes (the real `dfos-relay serve` console command),
each on its own SQLite file. The workload is written to one relay in random order and
reaches the others by gossip alone, sync alone or read-through alone."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import pytest

from peer import HttpPeerClient, PeerConfig
from relay import create_relay
from relay.testing.server import free_port, serve_on_loopback, wait_for_relay
from relay.testing.workload import mixed_workload
from tests.peering.mesh import (
    FAST,
    Mesh,
    assert_converged,
    chains_of,
    global_log,
    post_all,
    shuffled,
)
from tests.support.backends import make_store
from tests.support.relay_api import PAST_MS

BEHAVIORS = {
    "gossip": {"gossip": True, "read_through": False, "sync": False},
    "sync": {"gossip": False, "read_through": False, "sync": True},
    "read-through": {"gossip": False, "read_through": True, "sync": False},
}


@asynccontextmanager
async def loopback_mesh(tmp_path: Path, **flags: bool) -> AsyncIterator[Mesh]:
    ports = [free_port() for _ in range(3)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
        client = HttpPeerClient(http)
        relays = []
        for i, (port, url) in enumerate(zip(ports, urls, strict=True)):
            (tmp_path / f"r{i}").mkdir()
            store = await stack.enter_async_context(make_store("sqlite", tmp_path / f"r{i}"))
            peers = [PeerConfig(u, **flags) for u in urls if u != url]
            from relay.peering.service import build_peering

            relay = create_relay(store, peering=build_peering(peers, client, FAST))
            await stack.enter_async_context(serve_on_loopback(relay.app, port))
            relays.append(relay)
        yield Mesh(urls, relays, None, http)  # type: ignore[arg-type]


@pytest.mark.parametrize("behavior", list(BEHAVIORS))
async def test_three_relays_on_loopback_converge(tmp_path: Path, behavior: str) -> None:
    tokens = mixed_workload(150, seed=51, now_ms=PAST_MS)
    async with loopback_mesh(tmp_path, **BEHAVIORS[behavior]) as mesh:
        await post_all(mesh.http, mesh.urls[0], shuffled(tokens, seed=52))
        if behavior == "gossip":
            await mesh.settle_gossip()
            await assert_converged(mesh)
        elif behavior == "sync":
            for _ in range(2):
                for relay in mesh.relays:
                    await relay.sync_from_peers()
            await assert_converged(mesh)
        else:
            source = await global_log(mesh.http, mesh.urls[0])
            chains = chains_of(source)
            for url in mesh.urls[1:]:
                for chain_id, kind in chains.items():
                    path = "identities" if kind == "identity" else "content"
                    response = await mesh.http.get(f"{url}/{path}/{chain_id}")
                    assert response.status_code == 200
            chain_ops = {e["cid"] for e in source if e["kind"] in ("identity-op", "content-op")}
            await assert_converged(mesh, only=chain_ops)


async def test_three_relay_processes_converge_by_interval_sync(tmp_path: Path) -> None:
    """Three `dfos-relay serve` processes, peered for sync only (every 0.2s)."""
    tokens = mixed_workload(150, seed=53, now_ms=PAST_MS)
    ports = [free_port() for _ in range(3)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    procs = []
    command = Path(sys.executable).parent / "dfos-relay"
    # Only the flags below configure the relays; ignore any DFOS_RELAY_* in the caller's env.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFOS_RELAY_")}
    try:
        for i, port in enumerate(ports):
            args = [
                str(command),
                "serve",
                "--port",
                str(port),
                "--store",
                f"sqlite:///{tmp_path / f'r{i}.db'}",
                "--sync-interval",
                "0.2",
                "--log-level",
                "warning",
            ]
            for url in urls:
                if url != urls[i]:
                    args += ["--peer", f"{url}#sync"]
            procs.append(subprocess.Popen(args, env=env, stderr=subprocess.DEVNULL))
        async with httpx.AsyncClient(timeout=10) as http:
            for url in urls:
                await wait_for_relay(url)
            mesh = Mesh(urls, [], None, http)  # type: ignore[arg-type]
            await post_all(http, urls[0], shuffled(tokens, seed=54))
            deadline = time.monotonic() + 30
            while True:
                try:
                    await assert_converged(mesh)
                    break
                except AssertionError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.3)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
