"""Every body refused 503 because the receive budget was taken is counted in
``/metrics`` (``dfos_relay_receive_budget_refused_total``, shown from the
start at 0), and the bytes held by bodies being received are shown as
they are at the scrape (``dfos_relay_receive_budget_held_bytes``).

Through hypercorn on loopback, with a body held half-sent on a raw socket.
"""

from __future__ import annotations

import httpx

from tests.cli.test_serve_command import metric

from .test_bodies_being_received_share_a_byte_budget import (
    BUDGET,
    UPLOADS,
    RawUpload,
    held,
    until,
    world_with_budget,
)

REFUSED = "dfos_relay_receive_budget_refused_total"
HELD = "dfos_relay_receive_budget_held_bytes"


async def scrape(client: httpx.AsyncClient) -> str:
    return (await client.get("/metrics")).text


async def test_refusals_are_counted_and_held_bytes_shown() -> None:
    async with world_with_budget() as (w, port):
        text = await scrape(w.client)
        assert f"{REFUSED} 0.0" in text.splitlines() and metric(text, HELD) == 0

        arriving = [RawUpload(w, port) for _ in range(UPLOADS)]
        for upload in arriving:
            await upload.open()
            await upload.send(upload.body[:-1])
        await until(lambda: held(w.relay) == BUDGET - UPLOADS, "the uploads received")
        assert metric(await scrape(w.client), HELD) == BUDGET - UPLOADS

        for _ in range(2):
            refused = RawUpload(w, port)
            await refused.open()
            assert (await refused.answer())[0] == 503
            await refused.close()
        assert metric(await scrape(w.client), REFUSED) == 2

        for upload in arriving:
            await upload.close()
        await until(lambda: held(w.relay) == 0, "the budget given back")
        assert metric(await scrape(w.client), HELD) == 0
