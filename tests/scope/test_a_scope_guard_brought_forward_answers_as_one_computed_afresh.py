"""A scope guard that brings its closure forward over what the log committed
since (hypothesis) answers exactly as a guard that computes the closure
afresh over the same store: random worlds reach the mirror's store in
random chunks, in causal or shuffled order (ops wait for what they need,
then are sequenced), sometimes under a new epoch; before each chunk, every
op of the world is judged alone (so the answer is the store's closure, not
the batch's) and the chunk is judged as the batch it comes in."""

from __future__ import annotations

import asyncio
import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from relay import create_relay
from relay.scope import ScopeGuard
from stores.memory import MemoryStore

from .world import picked_scope, random_world


def chunks(tokens: list[str], cuts: list[int]) -> list[list[str]]:
    at = sorted({c % (len(tokens) + 1) for c in cuts} | {0, len(tokens)})
    return [tokens[a:b] for a, b in itertools.pairwise(at)]


async def answers(guard: ScopeGuard, tokens: list[str], chunk: list[str]) -> list[list[int]]:
    alone = [(await guard.split([token])).kept_at for token in tokens]
    return [*alone, (await guard.split(chunk)).kept_at]


async def check(seed: int, picks: list[int], cuts: list[int], shuffled: bool, resets: int) -> None:
    tokens = random_world(seed)
    serving = MemoryStore()
    async with create_relay(serving).running() as source:
        await source.ingest(tokens)
        scope = await picked_scope(serving, picks)
    order = list(tokens)
    if shuffled:
        random.Random(seed).shuffle(order)
    store = MemoryStore()
    relay = create_relay(store)
    async with relay.running():
        ours = ScopeGuard(store, scope)
        steps = [*chunks(order, cuts), []]
        for n, chunk in enumerate(steps):
            if resets >> n & 1:
                await store.reset_feed_epoch()
            afresh = ScopeGuard(store, scope)
            assert await answers(ours, tokens, chunk) == await answers(afresh, tokens, chunk)
            await relay.ingest(chunk)
        assert await store.log_length() > 0


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    picks=st.lists(st.integers(0, 100), min_size=1, max_size=3),
    cuts=st.lists(st.integers(0, 100), max_size=5),
    shuffled=st.booleans(),
    resets=st.integers(0, 2**7 - 1),
)
def test_a_guard_brought_forward_answers_as_one_computed_afresh(
    seed: int, picks: list[int], cuts: list[int], shuffled: bool, resets: int
) -> None:
    asyncio.run(check(seed, picks, cuts, shuffled, resets))
