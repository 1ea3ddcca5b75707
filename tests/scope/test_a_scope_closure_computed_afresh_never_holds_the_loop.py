"""A scope's closure computed over the whole scope (a scoped ``/log`` page
with no checkpoint near it, a scope guard's first judgement) is read a
page at a time with the loop let go between pages, as a bootstrap's is: a
large scope is a great many reads and tokens decoded, and on a store whose
reads do not suspend (memory) it held every other request of the relay
for all of it. The bound is the bootstrap test's for one subscriber."""

from __future__ import annotations

import httpx

from relay import create_relay
from relay.scope import Scope, ScopeGuard
from relay.testing.workload import WorkloadBuilder
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client
from tests.support.loop_stall import longest_stall
from tests.support.relay_api import PAST_MS

LONG = 3000  # ops of each long chain: about 90 ms of the loop in one go before
STALL_BOUND_S = 0.025


def _long_chains() -> tuple[list[str], Scope, str]:
    """An identity and a content chain of ``LONG`` ops each (the scope),
    and an op of another DID (outside it)."""
    b = WorkloadBuilder(seed=23, start_ms=PAST_MS - 10**9, step_ms=10)
    alice, chain = b.long_chains(LONG)
    held = list(b.tokens)
    b.identity()
    return held, Scope.of([alice.did, chain.content_id]), b.tokens[-1]


async def test_a_closure_computed_afresh_lets_the_loop_go_between_pages() -> None:
    held, scope, outsider = _long_chains()
    store = MemoryStore()
    relay = create_relay(store)
    async with relay.running(), asgi_client(relay.app) as client:
        for at in range(0, len(held), 500):
            await relay.ingest(held[at : at + 500])

        # a page after an op near the end of the log, with no checkpoint near it
        late = (await store.read_seq_range(len(held) - 10, len(held), 1))[0].cid

        async def scoped_page(http: httpx.AsyncClient) -> int:
            query = {"scope": ",".join(scope.members), "after": late, "limit": "5"}
            answer = await http.get("/log", params=query)
            assert answer.status_code == 200, answer.text
            return len(answer.json()["entries"])

        served, page_stall = await longest_stall(scoped_page(client))
        assert served == 5
        assert page_stall < STALL_BOUND_S, f"a scoped page stalled {page_stall * 1000:.0f} ms"

        guard = ScopeGuard(store, scope)
        split, guard_stall = await longest_stall(guard.split([outsider]))
        assert split.kept == [] and guard.rebuilds == 1
        assert guard_stall < STALL_BOUND_S, f"the guard stalled {guard_stall * 1000:.0f} ms"
