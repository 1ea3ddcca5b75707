"""A push naming a sender DID we cannot place makes the relay read the
well-known documents of its peers not resolved yet (the sender may be one
of them), at most once per retry interval, and waits for them at most
``fanout_list_wait_s``: the read goes on in the background, and later
pushes do not wait for it again. A peer whose document hangs used to hold
such a push for the whole read (up to the client's read timeout), and,
once the read was older than the retry interval, every push after it."""

from __future__ import annotations

import asyncio
import time

from peer import PeerConfig
from peer.base import RELAY_SENDER_HEADER, RELAY_SENDER_PROOF_HEADER
from peer.http import PeerLimits
from peer.sync_http import HttpSyncClient
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.directory import DIRECTORY_RETRY_S, PeerDirectory
from relay.peering.service import Peering, build_peering
from relay.testing.workload import mixed_workload
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import PAST_MS

from .hostile_http import Holding, routed_peer


class RefusedThenHeld(Holding):
    """Its first request is cut off at once (the read fails), the rest are held."""

    async def __call__(self, writer: asyncio.StreamWriter) -> None:
        if self.requests == 0:
            self.requests += 1
            return
        await super().__call__(writer)


LIMITS = PeerLimits(read_timeout_s=60.0, request_deadline_s=60.0)
WAIT_S = 0.3
PUSHES = 3


async def test_a_hanging_peer_document_does_not_hold_every_push() -> None:
    tokens = mixed_workload(PUSHES, seed=71, now_ms=PAST_MS)
    held = RefusedThenHeld()
    config = PeeringConfig(fanout_list_wait_s=WAIT_S, backoff_base_s=30.0)
    routes = {"/.well-known/dfos-relay": held, "/": Holding()}
    async with routed_peer(routes) as hanging:
        client = HttpSyncClient(limits=LIMITS)
        peers = [PeerConfig(hanging, gossip=True, sync=False, read_through=False)]
        relay = create_relay(peering=build_peering(peers, client, config))
        assert isinstance(relay.peering, Peering)
        async with (
            relay.running(),
            asgi_client(relay.app) as http,
        ):
            # the directory's first read failed; its second, one retry later, hangs,
            # and is older than the retry interval by the first push
            await asyncio.sleep(2 * DIRECTORY_RETRY_S + 0.5)
            headers = {RELAY_SENDER_HEADER: "did:dfos:unplaced", RELAY_SENDER_PROOF_HEADER: "x.y.z"}
            took = []
            for token in tokens:
                start = time.monotonic()
                async with asyncio.timeout(10):
                    answer = await http.post(
                        "/operations", json={"operations": [token]}, headers=headers
                    )
                took.append(time.monotonic() - start)
                assert answer.status_code == 200, answer.text
                assert answer.json()["results"][0]["status"] == "new"
        await client.aclose()
    assert sum(took) < WAIT_S + 1.0, f"pushes waited for the hanging read: {took}"
    assert held.requests == 2  # read again once, and never answered


async def test_a_read_started_for_a_request_is_waited_for_at_most_wait_s() -> None:
    held = Holding()
    async with routed_peer({"/": held}) as hanging:
        client = HttpSyncClient(limits=LIMITS)
        directory = PeerDirectory([hanging], client)
        start = time.monotonic()
        await directory.resolve_if_due([hanging], wait_s=WAIT_S)
        first = time.monotonic() - start
        await directory.resolve_if_due([hanging], wait_s=WAIT_S)  # running: not waited for
        both = time.monotonic() - start
        assert held.requests == 1 and directory.did_of(hanging) is None
        await directory.stop()
        await client.aclose()
    assert WAIT_S <= first < WAIT_S + 0.3
    assert both - first < 0.1
