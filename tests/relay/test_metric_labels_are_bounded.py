"""A client cannot grow the request-latency series without bound: routes are
labelled by template and methods outside the standard set as ``other``."""

from __future__ import annotations

import pytest

from stores.memory import MemoryStore
from tests.support.served import TRANSPORTS, served_relay


def series_of(text: str, name: str) -> set[str]:
    """The distinct label sets of metric ``name`` (its ``_count`` lines)."""
    return {
        line.split("{", 1)[1].rsplit("}", 1)[0]
        for line in text.splitlines()
        if line.startswith(name + "_count{")
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_made_up_methods_and_paths_share_one_series(transport: str) -> None:
    async with served_relay(MemoryStore(), transport) as served:
        client = served.client
        for i in range(50):
            await client.request(f"PROBE{i}", "/operations")
            await client.request(f"PROBE{i}", f"/no/such/path/{i}")
            await client.get(f"/operations/not-a-cid-{i}")
        text = (await client.get("/metrics")).text
    series = series_of(text, "dfos_relay_http_request_duration_seconds")
    assert not any("PROBE" in s or "/no/such" in s or "not-a-cid" in s for s in series)
    assert 'method="other",route="/operations",status="405"' in series
    assert 'method="other",route="unmatched",status="404"' in series
    assert len(series) < 10  # not one per request
