"""A body that holds receive budget cannot hold it for long by banking time:
sending fast moves its deadline at most the grace (``body_grace_s``) ahead,
so a body sent fast and then trickled below the minimum rate is answered 408
within about the grace and gives its bytes back, and another large body is
received. (When sending fast banked a second per ``body_min_rate`` bytes,
bodies filling the 64 MiB budget could then stall for over an hour, every
other body over 64 KiB answered 503 meanwhile.) A body that keeps up the
minimum rate after a fast start is read, however long past the grace.

Through hypercorn on loopback, with raw sockets so a body can be trickled.
"""

from __future__ import annotations

import asyncio
import contextlib

from relay import RelayConfig

from .test_bodies_being_received_share_a_byte_budget import (
    BUDGET,
    SIZE,
    UPLOADS,
    RawUpload,
    held,
    padded,
    until,
    world_with_budget,
)

GRACE_S = 1.0
MIN_RATE = 1024  # bytes a second: SIZE sent fast banked ~128 s before the fix
SLACK_S = 3.0  # how late past the deadline an answer may come on a busy machine
LEFT = 100  # bytes of each held body not sent fast
CONFIG = RelayConfig(receive_budget_bytes=BUDGET, body_grace_s=GRACE_S, body_min_rate=MIN_RATE)


async def drip(upload: RawUpload, data: bytes, every_s: float) -> None:
    """Send ``data`` a byte each ``every_s`` seconds (until the relay hangs up)."""
    with contextlib.suppress(OSError):
        for byte in data:
            await asyncio.sleep(every_s)
            await upload.send(bytes([byte]))


async def test_a_body_sent_fast_then_trickled_is_cut_off_and_gives_the_budget_back() -> None:
    async with world_with_budget(CONFIG) as (w, port):
        trickling = [RawUpload(w, port) for _ in range(UPLOADS)]
        for upload in trickling:  # the budget filled at speed
            await upload.open()
            await upload.send(upload.body[:-LEFT])
        await until(lambda: held(w.relay) == BUDGET - UPLOADS * LEFT, "the bodies received")
        refused = await w.upload(w.alice, w.genesis, padded(w))
        assert refused.status_code == 503  # the budget is held

        # then five bytes a second each, far below the minimum rate
        drips = [
            asyncio.create_task(drip(upload, upload.body[-LEFT:], 0.2)) for upload in trickling
        ]
        try:
            for upload in trickling:
                status, _, body = await asyncio.wait_for(upload.answer(), GRACE_S + SLACK_S)
                assert status == 408 and "slowly" in body["error"]
        finally:
            for task in drips:
                task.cancel()
            for upload in trickling:
                await upload.close()
        await until(lambda: held(w.relay) == 0, "the budget given back")
        answer = await w.upload(w.alice, w.genesis, padded(w))
        assert answer.status_code == 200, answer.text


async def test_a_body_that_keeps_the_minimum_rate_after_a_fast_start_is_read() -> None:
    async with world_with_budget(CONFIG) as (w, port):
        steady = RawUpload(w, port)
        await steady.open()
        tail = 3 * MIN_RATE  # then 1.5 s (past the grace) at twice the minimum rate
        await steady.send(steady.body[:-tail])
        for start in range(SIZE - tail, SIZE, MIN_RATE // 4):
            await asyncio.sleep(0.125)
            await steady.send(steady.body[start : start + MIN_RATE // 4])
        status, _, body = await steady.answer()
        assert status == 200, body
        await steady.close()
        assert held(w.relay) == 0
