"""A purge in many steps starts a new feed epoch at its first step and at its
last, and keeps it between: a follower learns that what it holds may be
going, then that what is left is final; not one 410 (and one re-bootstrap)
per step. A purge cut short and finished at the next start begins with a new
epoch again (what followers hold may have lost ops meanwhile)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from relay import create_relay
from relay.admin.purge_steps import purge_in_steps
from relay.config import RelayConfig
from relay.rules.outcomes import Status
from relay.testing.workload import DAY_MS
from stores.base import RelayStore
from stores.moderation import BanRecord
from tests.admin.test_a_purge_cut_short_is_finished_at_the_next_start import Crash, workload

STEP_OPS = 4
NOW = 1_700_000_000_000


@asynccontextmanager
async def banned(store: RelayStore) -> AsyncIterator[str]:
    """A running relay holding the workload, its author banned: her DID."""
    tokens, alice = workload(NOW - DAY_MS)
    relay = create_relay(store, config=RelayConfig(purge_step_ops=STEP_OPS))
    async with relay.running():
        assert {r.status for r in await relay.ingest(tokens)} == {Status.NEW}
        await store.put_ban(BanRecord(alice, "spam", NOW, "did:dfos:op"))
        yield alice


async def test_a_purge_in_steps_starts_an_epoch_at_its_first_and_last_step(
    store: RelayStore,
) -> None:
    async with banned(store) as alice:
        before = await store.get_feed_epoch()
        epochs: list[str] = []

        async def after_step(done: bool) -> None:
            epochs.append(await store.get_feed_epoch())

        await purge_in_steps(store, alice, NOW, after_step, STEP_OPS)
    assert len(epochs) >= 4  # enough steps to have some between the first and last
    first, *between, last = epochs
    assert first != before and last != first
    assert set(between) == {first}


async def test_a_purge_finished_at_the_next_start_starts_an_epoch_at_once(
    store: RelayStore,
) -> None:
    async with banned(store) as alice:
        epochs: list[str] = []

        async def cut_after_two(done: bool) -> None:
            epochs.append(await store.get_feed_epoch())
            if len(epochs) == 2:
                raise Crash

        with pytest.raises(Crash):
            await purge_in_steps(store, alice, NOW, cut_after_two, STEP_OPS)
        resumed: list[str] = []

        async def after_step(done: bool) -> None:
            resumed.append(await store.get_feed_epoch())

        await purge_in_steps(store, alice, NOW, after_step, STEP_OPS, left_under_way=True)
    assert epochs[0] == epochs[1]
    assert resumed[0] != epochs[1] and resumed[-1] != resumed[0]
