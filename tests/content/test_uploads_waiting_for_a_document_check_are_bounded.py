"""Documents are checked one at a time (``relay.http.content``), and at most
``RelayConfig.parse_queue`` uploads wait for that, each holding its body (up
to 16 MiB): one more is answered at once 503 with ``Retry-After`` and the
JSON error shape, and its body is not kept.

Through hypercorn on loopback; the parse child, where a costly document is
checked, is a real process stopped with SIGSTOP so the admitted upload waits.
"""

from __future__ import annotations

import asyncio
import os
import signal

import httpx

from relay import RelayConfig, create_relay
from relay.parse_pool import OFF_LOOP_BYTES, PARSE_BUSY_RETRY_AFTER_S
from relay.testing.server import serve_on_loopback
from stores.memory import MemoryStore

from .conftest import start_world

BOUND = 1
COSTLY = b"[" + b"0," * OFF_LOOP_BYTES + b"0]"  # many values: checked in the child


async def test_an_upload_over_the_bound_is_answered_503() -> None:
    relay = create_relay(MemoryStore(), config=RelayConfig(parse_queue=BOUND))
    async with (
        serve_on_loopback(relay.app) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as client,
    ):
        w = await start_world(relay, client)
        assert (await w.upload(w.alice, w.genesis, COSTLY)).status_code == 400  # child up
        child = relay.parse_pool._child
        assert child is not None
        os.kill(child.pid, signal.SIGSTOP)
        try:
            waiting = asyncio.create_task(w.upload(w.alice, w.genesis, COSTLY))
            while relay.documents_waiting.count < BOUND:
                await asyncio.sleep(0.01)
            refused = await asyncio.wait_for(w.upload(w.alice, w.genesis, COSTLY), 30)
            assert not waiting.done()
        finally:
            os.kill(child.pid, signal.SIGCONT)
        assert (await waiting).status_code == 400  # checked once the child runs again
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == str(PARSE_BUSY_RETRY_AFTER_S)
        assert refused.json() == {
            "error": f"too many document uploads waiting (at most {BOUND}); retry later",
            "retryAfter": PARSE_BUSY_RETRY_AFTER_S,
        }
        assert relay.documents_waiting.count == 0
        # an ordinary document is checked as before
        assert (await w.upload(w.alice, w.genesis)).status_code == 200
