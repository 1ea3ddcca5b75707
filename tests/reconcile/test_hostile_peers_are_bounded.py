"""A hostile peer cannot stall or fool reconciliation (draft section 9):
each bound cuts it off (rounds, bytes, wall time, frame limit), malformed
or downgraded replies end the run, ids it advertises and then refuses to
serve are named, ops it serves are verified before anything is stored,
and the peer is backed off and logged. Hostile peers are real HTTP
servers on loopback."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from peer.base import PeerConfig
from relay import Relay, create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import Peering, build_peering
from relay.protocol.negentropy import Bound, Mode, cid_from_id, encode_varint
from relay.protocol.negentropy.wire import BoundWriter
from relay.reconcile.initiator import ReconcileBounds
from stores.base import RelayStore
from tests.reconcile.hostile_responder import hostile, id_list, random_fingerprint


@pytest.fixture
async def relay(store: RelayStore) -> AsyncIterator[Relay]:
    r = create_relay(store)
    async with r.running():
        yield r


TIGHT = ReconcileBounds(max_rounds=5, max_bytes=50_000, deadline_s=2.0, frame_limit=8192)


async def test_a_peer_that_never_agrees_is_cut_off_by_the_round_limit(relay: Relay) -> None:
    async def never(_: bytes) -> bytes:
        return random_fingerprint()

    async with hostile(never) as url:
        report = await relay.reconcile(url, bounds=TIGHT)
    assert report.rounds == 5 and "no agreement after 5 rounds" in (report.error or "")


async def test_a_peer_that_floods_is_cut_off_by_the_byte_limit(relay: Relay) -> None:
    bounds = ReconcileBounds(max_rounds=100, max_bytes=20_000, deadline_s=5, frame_limit=8192)

    async def big_fingerprints(_: bytes) -> bytes:
        # many adjacent fingerprint ranges: we must answer each, round after round
        writer = BoundWriter()
        ranges = b"".join(
            writer.encode(Bound(t)) + encode_varint(Mode.FINGERPRINT) + os.urandom(16)
            for t in range(1, 300)
        )
        return b"\x61" + ranges

    async with hostile(big_fingerprints) as url:
        report = await relay.reconcile(url, bounds=bounds)
    assert "bytes in one run" in (report.error or ""), report.error
    assert max(report.bytes_sent, report.bytes_received) <= bounds.max_bytes + 8192


async def test_a_reply_over_our_frame_limit_is_refused(relay: Relay) -> None:
    async def huge(_: bytes) -> bytes:
        return id_list([os.urandom(32) for _ in range(1000)])  # 32 KB > 8 KiB

    async with hostile(huge) as url:
        report = await relay.reconcile(url, bounds=TIGHT)
    assert "frame limit" in (report.error or "")
    assert report.need == 0  # nothing of the oversized reply was used


async def test_a_peer_that_never_answers_is_cut_off_by_the_deadline(relay: Relay) -> None:
    async def stall(_: bytes) -> bytes:
        await asyncio.sleep(30)
        return b"\x61"

    bounds = ReconcileBounds(deadline_s=0.5)
    async with hostile(stall) as url:
        started = asyncio.get_running_loop().time()
        report = await relay.reconcile(url, bounds=bounds)
    assert asyncio.get_running_loop().time() - started < 5
    assert "deadline" in (report.error or "")


@pytest.mark.parametrize(
    ("reply", "why"),
    [(b"\x61\x81", "malformed negentropy reply"),
     (b"\x61\x00\x00\x02\x05" + bytes(20), "malformed negentropy reply"),
     (b"\x60", "does not speak negentropy V1"),
     (b"", "malformed")],
)  # fmt: skip
async def test_malformed_and_downgraded_replies_end_the_run(
    relay: Relay, reply: bytes, why: str
) -> None:
    async def answer(_: bytes) -> bytes:
        return reply

    async with hostile(answer) as url:
        report = await relay.reconcile(url, bounds=TIGHT)
    assert why in (report.error or ""), report.error


async def test_ids_advertised_and_then_refused_are_named(relay: Relay) -> None:
    advertised = [os.urandom(32) for _ in range(3)]

    async def claim(_: bytes) -> bytes:
        return id_list(advertised)

    async with hostile(claim) as url:
        report = await relay.reconcile(url, direction="pull", bounds=TIGHT)
    assert report.need == 3 and sorted(report.refused) == sorted(cid_from_id(i) for i in advertised)
    assert "advertised 3 ops it then did not serve" in (report.error or "")


async def test_served_ops_are_verified_before_anything_is_stored(relay: Relay) -> None:
    advertised = [os.urandom(32) for _ in range(2)]

    async def claim(_: bytes) -> bytes:
        return id_list(advertised)

    def forged(cids: list[str]) -> dict[str, object]:
        return {"operations": ["eyJhbGciOiJFZERTQSJ9.e30.AAAA", "not a token"], "missing": []}

    before = await relay.store.log_length()
    async with hostile(claim, forged) as url:
        report = await relay.reconcile(url, direction="pull", bounds=TIGHT)
    assert report.fetched == 2 and report.sequenced == 0
    assert await relay.store.log_length() == before


async def test_a_hostile_reconcile_peer_is_backed_off_and_logged(
    store: RelayStore, caplog: pytest.LogCaptureFixture
) -> None:
    async def garbage(_: bytes) -> bytes:
        return b"\x61\x81"

    async with hostile(garbage) as url:
        config = PeeringConfig(reconcile_interval_s=60, backoff_base_s=30, backoff_max_s=60)
        peering = build_peering(
            [PeerConfig(url, gossip=False, read_through=False, sync=False, reconcile=True)],
            None,
            config,
        )
        relay = create_relay(store, peering=peering)
        async with relay.running():
            assert isinstance(relay.peering, Peering)
            for _ in range(100):
                if relay.peering.backoff.failures(url):
                    break
                await asyncio.sleep(0.05)
            assert relay.peering.backoff.failures(url) == 1
            assert not relay.peering.backoff.ready(url)
            assert relay.peering.repair.last[url].error
    assert any(
        "reconcile failed" in r.getMessage() and url in r.getMessage() for r in caplog.records
    )
