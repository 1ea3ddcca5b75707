"""Our Negentropy V1 responder, spoken to by an implementation we did not
write: nostr-tools' NIP-77 port of the reference initiator, run under node
(installed by ``./dev test`` into ``tests/interop``). It must learn exactly
the symmetric difference, with and without frame limits on either side,
from the pure protocol core and from a real relay's ``POST
/sync/negentropy`` through hypercorn.

That client reads varints as 32-bit integers (Nostr timestamps are
seconds), so timestamps here stay below 2**31: the relay's ops are dated
in January 1970. Wider timestamps are covered by our own client's tests."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from relay import RelayConfig
from relay.protocol.envelope import check_cid
from relay.protocol.jws import decode_jws
from relay.protocol.negentropy import Negentropy, NegentropyOptions, VectorStorage, id_from_cid
from relay.testing.workload import mixed_workload
from stores.base import RelayStore
from tests.support.relay_api import post
from tests.support.served import served_relay

from .test_sync_routes import created_at_ms, items_of

INTEROP = Path(__file__).resolve().parent.parent / "interop"
CLIENT = INTEROP / "negentropy_client.mjs"
NODE = shutil.which("node")
DAY_MS = 86_400_000
Item = tuple[int, bytes]

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    if not (INTEROP / "node_modules" / "nostr-tools").is_dir():
        pytest.fail("tests/interop/node_modules is missing: ./dev test installs it (npm ci)")


def setup_line(items: list[Item], frame: int, url: str | None = None) -> str:
    return json.dumps({"items": [[t, i.hex()] for t, i in items], "frame": frame, "url": url})


def outcome(line: str) -> tuple[set[bytes], set[bytes], int]:
    assert line.startswith("DONE "), line
    done: dict[str, Any] = json.loads(line[5:])
    have = {bytes.fromhex(x) for x in done["have"]}
    need = {bytes.fromhex(x) for x in done["need"]}
    return have, need, int(done["rounds"])


def reconcile_in_process(
    client_items: list[Item], server_items: list[Item], frame: int, opts: NegentropyOptions
) -> tuple[set[bytes], set[bytes], int]:
    server = Negentropy(VectorStorage(sorted(server_items)), opts, random.Random(3))
    assert NODE is not None
    with subprocess.Popen(
        [NODE, str(CLIENT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as node:
        assert node.stdin is not None and node.stdout is not None
        node.stdin.write(setup_line(client_items, frame) + "\n")
        node.stdin.flush()
        for _ in range(2000):
            line = node.stdout.readline().strip()
            if not line or line.startswith("DONE "):
                return outcome(line)
            reply = server.respond(bytes.fromhex(line))
            if opts.frame_size_limit:
                assert len(reply) <= opts.frame_size_limit
            node.stdin.write(reply.hex() + "\n")
            node.stdin.flush()
        node.kill()
    raise AssertionError("no end after 2000 rounds")


def three_sets(
    seed: int, shared: int, only_client: int, only_server: int, max_ts: int
) -> tuple[list[Item], list[Item], list[Item]]:
    rng = random.Random(seed)

    def items(n: int) -> list[Item]:
        return [(rng.randint(0, max_ts), rng.randbytes(32)) for _ in range(n)]

    return items(shared), items(only_client), items(only_server)


@pytest.mark.parametrize(
    ("shared", "only_client", "only_server", "max_ts"),
    [(0, 0, 0, 10), (0, 5, 0, 10), (0, 0, 5, 10), (10, 3, 4, 2), (3000, 200, 200, 0),
     (5000, 300, 0, 5), (20000, 1000, 1000, 2**31 - 2), (20000, 50, 3000, 2**31 - 2)],
)  # fmt: skip
@pytest.mark.parametrize(("client_frame", "server_frame"), [(60000, 0), (4096, 4096)])
def test_the_reference_initiator_learns_the_symmetric_difference(
    shared: int, only_client: int, only_server: int, max_ts: int, client_frame: int,
    server_frame: int,
) -> None:  # fmt: skip
    both, mine, theirs = three_sets(shared + only_server, shared, only_client, only_server, max_ts)
    have, need, _ = reconcile_in_process(
        both + mine, both + theirs, client_frame, NegentropyOptions(frame_size_limit=server_frame)
    )
    assert have == {i for _, i in mine}
    assert need == {i for _, i in theirs}


async def test_the_reference_initiator_reconciles_with_a_relay_over_http(
    store: RelayStore,
) -> None:
    # ops of January 1970, and a relay whose clock (its own ops) is there too
    tokens = mixed_workload(300, seed=5, now_ms=32 * DAY_MS)
    config = RelayConfig(sync_frame_limit=4096)
    async with served_relay(store, "hypercorn", config, start_ms=3 * DAY_MS) as served:
        for start in range(0, 250, 50):
            assert {r["status"] for r in await post(served.client, tokens[start : start + 50])} <= {
                "new", "duplicate"}  # fmt: skip
        relay_items = await items_of(served.client)
        assert max(t for t, _ in relay_items) < 2**31
        relay_only = relay_items[::13]
        unposted = [
            (created_at_ms(t), id_from_cid(check_cid(decode_jws(t))[0])) for t in tokens[250:]
        ]
        client_items = [i for i in relay_items if i not in relay_only] + unposted
        assert NODE is not None
        node = await asyncio.create_subprocess_exec(
            NODE, str(CLIENT), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        url = str(served.client.base_url.join("/sync/negentropy"))
        out, _ = await asyncio.wait_for(
            node.communicate((setup_line(client_items, 4096, url) + "\n").encode()), 60
        )
    have, need, rounds = outcome(out.decode().strip())
    assert need == {i for _, i in relay_only}
    assert have == {i for _, i in unposted}
    assert have and rounds > 1  # the frame limits made it take several rounds
