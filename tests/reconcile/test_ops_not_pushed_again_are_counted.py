"""What a run does not push again is counted per peer in ``/metrics``, as
in the report: ``dfos_relay_reconcile_held_back_total`` (ops the peer
parked when pushed before, ``heldBack``) and
``dfos_relay_reconcile_taken_before_total`` (ops it answered ``new`` to
before and names as lacking again, ``takenBefore``). A peer whose
taken-before count keeps growing is one that lies about what it took.

Our relay is served by hypercorn on loopback and scraped over HTTP; the
peer is the hostile responder (it lacks everything, and answers every push
with what its ``Taker`` says)."""

from __future__ import annotations

import httpx

from relay import create_relay
from relay.testing.server import serve_on_loopback
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.reconcile.hostile_responder import hostile, lacks_everything
from tests.reconcile.test_ids_to_push_are_bounded_per_run import Taker
from tests.support.relay_api import PAST_MS

HELD_BACK = "dfos_relay_reconcile_held_back_total"
TAKEN_BEFORE = "dfos_relay_reconcile_taken_before_total"


async def _claim(_: bytes) -> bytes:
    return lacks_everything()


async def scraped(ours: str, name: str) -> dict[str, float]:
    """``name``'s value per label set, read from our ``/metrics``."""
    async with httpx.AsyncClient(timeout=10) as http:
        text = (await http.get(ours + "/metrics")).text
    values = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) :].rsplit(" ", 1)
            values[labels] = float(value)
    return values


async def test_ops_a_peer_said_it_took_and_lacks_again_are_counted() -> None:
    relay = create_relay(MemoryStore())
    liar = Taker("new")
    async with serve_on_loopback(relay.app) as ours, hostile(_claim, submit=liar) as url:
        await relay.ingest(mixed_workload(150, seed=101, now_ms=PAST_MS))
        first = await relay.reconcile(url, "push")
        assert first.ok and first.accepted == first.have > 100
        assert await scraped(ours, TAKEN_BEFORE) == {f'{{peer="{url}"}}': 0}

        for runs in (1, 2):  # each run that names them again counts them again
            again = await relay.reconcile(url, "push")
            assert not again.ok and again.taken_before == first.have
            assert await scraped(ours, TAKEN_BEFORE) == {f'{{peer="{url}"}}': runs * first.have}
        assert await scraped(ours, HELD_BACK) == {f'{{peer="{url}"}}': 0}


async def test_ops_a_peer_parked_are_counted_as_held_back() -> None:
    relay = create_relay(MemoryStore())
    parker = Taker("rejected", "missing-previous")
    async with serve_on_loopback(relay.app) as ours, hostile(_claim, submit=parker) as url:
        await relay.ingest(mixed_workload(150, seed=102, now_ms=PAST_MS))
        first = await relay.reconcile(url, "push")
        assert first.ok and first.parked == first.have > 100
        assert await scraped(ours, HELD_BACK) == {f'{{peer="{url}"}}': 0}

        again = await relay.reconcile(url, "push")
        assert again.ok and again.held_back == first.have
        assert await scraped(ours, HELD_BACK) == {f'{{peer="{url}"}}': first.have}
        assert await scraped(ours, TAKEN_BEFORE) == {f'{{peer="{url}"}}': 0}
