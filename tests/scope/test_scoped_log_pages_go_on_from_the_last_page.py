"""A scoped ``/log`` page goes on from the closure the previous page ended
at (a checkpoint) instead of computing it again from the log's start, and
serves exactly what it served before: the same entries, cursors and
``closureMissing`` page for page, whether it resumes at its cursor, catches
up from an older checkpoint (another worker's) or has none."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from relay import create_relay
from relay.scope import Scope, parse_scope
from relay.scope.checkpoints import ClosureCheckpoints
from relay.scope.pages import ScopedLogStore, ScopedPage, scoped_log_page
from stores.memory import MemoryStore
from stores.sqlite import SqliteStore

from .world import build_world, picked_scope, random_world, remove_identity

PageShape = tuple[list[tuple[str, bool]], str | None, str | None, dict[str, list[str]]]
Pager = Callable[[str | None], Awaitable[ScopedPage]]


def shape(page: ScopedPage) -> PageShape:
    entries = [(a.entry.cid, a.late) for a in page.entries]
    return entries, page.cursor, page.scanned_to, page.missing


async def all_pages(pager: Pager) -> list[PageShape]:
    pages: list[PageShape] = []
    after: str | None = None
    for _ in range(10_000):
        page = await pager(after)
        pages.append(shape(page))
        after = page.cursor
        if after is None:
            return pages
    raise AssertionError("the scoped log did not end")


async def assert_same_pages(store: ScopedLogStore, scope: Scope, limit: int, budget: int) -> None:
    def pager(checkpoints: Callable[[], ClosureCheckpoints | None]) -> Pager:
        return lambda after: scoped_log_page(
            store, scope, after, limit, scan_budget=budget, checkpoints=checkpoints()
        )

    # the oracle: every page computes its closure from the log's start
    fresh = await all_pages(pager(lambda: None))
    shared = ClosureCheckpoints()
    assert await all_pages(pager(lambda: shared)) == fresh
    # two workers taking turns: each catches up from its previous page
    workers = [ClosureCheckpoints(), ClosureCheckpoints()]
    turn = iter(range(10**6))
    assert await all_pages(pager(lambda: workers[next(turn) % 2])) == fresh
    if len(fresh) > 1:  # a page asked for twice (a retry) is the same page
        again = await scoped_log_page(store, scope, fresh[0][1], limit, budget, shared)
        assert shape(again) == fresh[1]


async def check(seed: int, picks: list[int], limit: int, budget: int) -> None:
    store = MemoryStore()
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest(random_world(seed))
        await assert_same_pages(store, await picked_scope(store, picks), limit, budget)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    picks=st.lists(st.integers(0, 100), min_size=1, max_size=3),
    limit=st.integers(1, 4),
    budget=st.sampled_from([2, 5, 10_000]),
)
def test_pages_from_checkpoints_are_the_pages_computed_afresh(
    seed: int, picks: list[int], limit: int, budget: int
) -> None:
    asyncio.run(check(seed, picks, limit, budget))


async def test_a_missing_closure_member_is_named_on_the_same_pages(tmp_path: Path) -> None:
    world = build_world(seed=52)
    db = tmp_path / "serving.db"
    store = SqliteStore(db)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest(world.tokens)
        remove_identity(db, world.witness.did)
        later = [world.builder.content_update(world.chain) for _ in range(2)]
        await relay.ingest(world.tokens[-2:])  # pages after the loss name it too
        assert len(await store.read_operations(later)) == 2
        await assert_same_pages(store, parse_scope(world.chain.content_id), 1, 10_000)
        last = await scoped_log_page(store, parse_scope(world.chain.content_id), None, 100)
        assert last.missing == {"identity": [world.witness.did]}
