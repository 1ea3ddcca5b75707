"""A relay process SIGKILLed while a purge is half done (some steps
committed, one perhaps in flight) finishes the purge when it is started
again on the same store: the planned ops are gone, each recorded once, every
other op is served as before, and the store audits clean."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from relay import create_relay
from relay.admin import admin_audience
from relay.audit import audit_store
from relay.protocol import create_auth_token
from relay.rules.outcomes import Status
from relay.testing.workload import DAY_MS, Actor, WorkloadBuilder
from stores.base import RelayStore
from stores.factory import open_store_from_url
from tests.stores.test_crash_safety import DURABLE, durable_url
from tests.support.relay_process import RelayProcess
from tests.support.whole_purge import plan_purge

CHAINS, UPDATES = 30, 99  # alice's: 3000 ops
STEP_OPS = 10  # 300 steps: the kill lands among them
POLLS = 3000  # of 10 ms: a bound on a hang, not a timing


def admin_token(operator: Actor, relay_did: str) -> str:
    now = int(time.time())
    kid = f"{operator.did}#{operator.keypair.key_id}"
    return create_auth_token(
        operator.keypair, kid, operator.did, admin_audience(relay_did), now - 5, now + 120
    )


async def stored(store: RelayStore) -> dict[str, str]:
    return {e.cid: e.jws_token for e in await store.read_seq_range(0, 10**9, 10**6)}


async def until(check: Callable[[], Awaitable[bool]], relay: RelayProcess) -> None:
    for _ in range(POLLS):
        if await check():
            return
        assert relay.proc is not None and relay.proc.poll() is None, "the relay exited"
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


@pytest.mark.parametrize("backend", DURABLE)
async def test_a_purge_killed_mid_way_is_finished_after_a_restart(
    backend: str, tmp_path: Path
) -> None:
    b = WorkloadBuilder(seed=43, start_ms=time.time_ns() // 1_000_000 - DAY_MS)
    operator, alice, bob = b.identity(), b.identity(), b.identity()
    for _ in range(CHAINS):
        chain = b.content_create(alice)
        for _ in range(UPDATES):
            b.content_update(chain, alice)
    b.content_create(bob)
    async with durable_url(backend, tmp_path) as url:
        store = open_store_from_url(url)
        relay = create_relay(store)
        async with relay.running():
            assert {r.status for r in await relay.ingest(b.tokens)} == {Status.NEW}
            relay_did = relay.did
            planned = {op.cid for op in (await plan_purge(store, alice.did, 0)).operations}
            kept = {c: t for c, t in (await stored(store)).items() if c not in planned}
        settings = {
            "DFOS_RELAY_ADMIN_DIDS": operator.did,
            "DFOS_RELAY_PURGE_STEP_OPS": str(STEP_OPS),
        }
        process = RelayProcess(url, settings=settings)
        await process.start()
        watch = open_store_from_url(url)
        await watch.open()
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                headers = {"Authorization": f"Bearer {admin_token(operator, relay_did)}"}
                purge = asyncio.create_task(
                    client.put(f"{process.url}/admin/bans/{alice.did}",
                               json={"purge": True}, headers=headers)
                )  # fmt: skip

                async def some_steps_done() -> bool:
                    return len(await watch.operations_signed_by(alice.did)) < len(planned) - 100

                await until(some_steps_done, process)
                process.kill()
                with contextlib.suppress(httpx.HTTPError):
                    await purge
            assert alice.did in await watch.purges_under_way()
            assert planned & (await stored(watch)).keys(), "the purge ended before the kill"

            await process.start()

            async def finished() -> bool:
                return not await watch.purges_under_way()

            await until(finished, process)
            process.stop()
            assert await stored(watch) == kept
            purged = sorted(p.cid for p in await watch.list_purged(alice.did))
            assert purged == sorted(planned)
            report = await audit_store(watch)
            assert report.clean, [f.line() for f in report.findings]
        finally:
            process.kill()
            await watch.close()
