"""``dfos-relay serve --peer URL#live+reconcile --scope ...`` mirrors only
the scope and its closure from the peer, whatever the flag order, and its
ledger names the scoped link; a bad scope stops start-up with one line."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.scope import parse_scope
from tests.cli.conftest import DFOS_RELAY, RelayProcess, clean_env
from tests.peering.mesh import post_all

from .world import build_world, expected_closure


async def log_of(http: httpx.AsyncClient, url: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    after = None
    while True:
        params = {"limit": "1000", **({"after": after} if after else {})}
        page = (await http.get(url + "/log", params=params)).json()
        entries.extend(page["entries"])
        after = page["cursor"]
        if after is None:
            return entries


async def own_identity(http: httpx.AsyncClient, url: str) -> str:
    return str((await http.get(url + "/.well-known/dfos-relay")).json()["did"])


@pytest.mark.parametrize(
    "order",
    [
        ["--peer", "{peer}#live+reconcile", "--scope", "{scope}", "--store", "{store}"],
        ["--scope", "{scope}", "--store", "{store}", "--peer", "{peer}#live+reconcile"],
        ["--store", "{store}", "--scope-file", "{file}", "--peer", "{peer}#live+reconcile"],
    ],
    ids=["peer-first", "scope-first", "scope-file"],
)
async def test_a_scoped_mirror_holds_the_closure_and_nothing_else(
    tmp_path: Path, order: list[str]
) -> None:
    world = build_world(seed=41)
    scope = parse_scope(world.chain.content_id)
    scope_file = tmp_path / "scope.txt"
    scope_file.write_text(f"# the chain we mirror\n{world.chain.content_id}\n")
    serving = RelayProcess(["--store", "memory://", "--log-level", "warning"])
    mirror: RelayProcess | None = None
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await post_all(http, serving.url, world.tokens)
            args = [
                a.format(
                    peer=serving.url, scope=scope.query_value(), file=scope_file,
                    store=f"sqlite:///{tmp_path / 'mirror.db'}",
                )
                for a in order
            ]  # fmt: skip
            mirror = RelayProcess([*args, "--reconcile-interval", "0.5", "--log-level", "warning"])
            me = await own_identity(http, mirror.url)
            expected = expected_closure(world)
            got: set[tuple[str, str]] = set()
            for _ in range(200):
                entries = await log_of(http, mirror.url)
                got = {(e["kind"], e["chainId"]) for e in entries if e["chainId"] != me}
                if got == expected:
                    break
                await asyncio.sleep(0.1)
            assert got == expected
            assert world.countersign in {e["cid"] for e in entries}
            peers = (await http.get(mirror.url + "/peers")).json()["peers"]
            [peer] = [p for p in peers if p["url"] == serving.url]
            inbound = [link for link in peer["links"] if link["direction"] == "in"]
            assert inbound and {link["scopeId"] for link in inbound} == {scope.scope_id}
    finally:
        if mirror is not None:
            mirror.stop()
        serving.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--peer", "http://127.0.0.1:9#live", "--scope", "did:dfos:bad"], "--scope"),
        (["--scope", "did:dfos:bad", "--peer", "http://127.0.0.1:9#live"], "--scope"),
        (["--scope", "c" * 22], "needs a peer to mirror it from"),
        (
            ["--peer", "http://127.0.0.1:9#live", "--scope-file", "/nowhere/scope.txt"],
            "--scope-file",
        ),
    ],
)
def test_a_bad_scope_stops_start_up_with_one_line(args: list[str], message: str) -> None:
    done = subprocess.run(
        [DFOS_RELAY, "serve", "--store", "memory://", *args],
        env=clean_env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
