"""A bootstrap hands the event loop back while it builds its snapshot.

A store whose reads never suspend (the memory store) and an SSE send that
does not wait while the socket takes the bytes left a bootstrap holding
the loop from its STATUS to its EOSE: ~0.5 s of CPU over a log of 20,000
ops, during which the relay answered nothing else, and subscribers
bootstrapping at once held it one after the other (ten of them: /healthz
unanswered for 7 s). The snapshot now pauses whenever it has run
``SLICE_S`` without one, whatever its filter keeps (one that matches
nothing sends nothing, so no send could pause it either; over this log
such a scan is too short to measure, ~2.5 µs a root).

The same holds for a bootstrap filtered by kinds, authors or chains, or
scoped, over a store that holds long chains, paced by the same slices: a
chain's item read the chain's every op at once (~40 ms of CPU for a chain
of 5,000 ops, whichever filter kept it), and a scope's closure was read
whole before the first item (~170 ms for two such chains), and its
countersignature reads, one per op of the scope, ran without a pause.

Stalls are the loop thread's CPU time between two turns of a ticker, so a
machine busy with other work does not make them longer."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from relay import create_relay
from relay.testing.server import serve_on_loopback
from relay.testing.workload import WorkloadBuilder, mixed_workload
from stores.memory import MemoryStore
from tests.support.loop_stall import longest_stall
from tests.support.relay_api import PAST_MS

OPS = 4000  # ~2000 snapshot items: before, 70 ms of CPU in one go (280 ms for four at once)
# Bootstraps under way each run a slice (5 ms) per turn of the loop; the rest
# of the bound is a send, a page read and scheduling.
STALL_PER_SUBSCRIBER_S = 0.010
STALL_MARGIN_S = 0.015
LONG = 5000  # ops of each long chain (an identity and a content chain)


async def _bootstraps(http: httpx.AsyncClient, query: str, subscribers: int) -> list[int]:
    """Each bootstrap's count of snapshot events, read to its end."""

    async def one() -> int:
        async with http.stream("GET", f"/changes?{query}") as answer:
            assert answer.status_code == 200
            text = (await answer.aread()).decode()
        assert "event: eose" in text
        return text.count("event: snapshot")

    return await asyncio.gather(*(one() for _ in range(subscribers)))


@pytest.mark.parametrize("subscribers", [1, 4], ids=["one-bootstrap", "four-at-once"])
async def test_a_bootstrap_over_a_memory_store_never_holds_the_loop(subscribers: int) -> None:
    relay = create_relay(MemoryStore())
    async with (
        serve_on_loopback(relay.app) as url,
        # made before the measure: a client's TLS context costs ~25 ms of CPU
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        tokens = mixed_workload(OPS, seed=17, now_ms=PAST_MS)
        for at in range(0, len(tokens), 500):
            await relay.ingest(tokens[at : at + 500])
        counts, stall = await longest_stall(_bootstraps(http, "mode=bootstrap", subscribers))
    assert len(set(counts)) == 1 and counts[0] > OPS // 3  # each got the whole snapshot
    bound = subscribers * STALL_PER_SUBSCRIBER_S + STALL_MARGIN_S
    assert stall < bound, f"the loop stalled {stall * 1000:.0f} ms"


def _long_chains() -> tuple[tuple[str, ...], str, str]:
    """An identity of ``LONG`` ops and a content chain of ``LONG`` ops, with
    mixed ops beside them: the tokens, the DID and the contentId."""
    b = WorkloadBuilder(seed=5, start_ms=PAST_MS - 10**9, step_ms=10)
    alice, chain = b.long_chains(LONG)
    tokens = (*b.tokens, *mixed_workload(OPS // 2, seed=17, now_ms=PAST_MS))
    return tokens, alice.did, chain.content_id


async def test_a_filtered_or_scoped_bootstrap_over_long_chains_never_holds_the_loop() -> None:
    """Every way of keeping part of the snapshot, over one store (filling it
    is most of the test's time): kinds, authors, chains and a scope."""
    tokens, did, content_id = _long_chains()
    queries = {
        "kinds": "kinds=identity-op,content-op",
        "authors": f"authors={did}",
        "chains": f"chains={did},{content_id}",
        "scope": f"scope={did},{content_id}",
    }
    relay = create_relay(MemoryStore())
    async with (
        serve_on_loopback(relay.app) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        for at in range(0, len(tokens), 500):
            await relay.ingest(list(tokens[at : at + 500]))
        for kept, query in queries.items():
            for subscribers in (1, 4):
                bootstraps = _bootstraps(http, f"mode=bootstrap&{query}", subscribers)
                counts, stall = await longest_stall(bootstraps)
                assert len(set(counts)) == 1 and counts[0] >= 2, kept  # both long chains, at least
                bound = subscribers * STALL_PER_SUBSCRIBER_S + STALL_MARGIN_S
                assert stall < bound, (
                    f"{kept}, {subscribers} at once: the loop stalled {stall * 1000:.0f} ms"
                )
