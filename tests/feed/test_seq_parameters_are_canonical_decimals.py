"""Every seq-like parameter of the feed is read by one rule: a canonical
decimal (ASCII digits, no leading zero but for "0" itself), as the relay
writes positions. ``since``, ``Last-Event-ID`` and a token's position
refused ``01`` while ``until_seq`` and ``limit`` took it as 1; a consumer
passes back the positions it was given (the progress-token draft: "Resume
requests MUST pass the exact previously observed token"), so a numeral the
relay never writes is malformed, on every parameter: 400 with a JSON
error, on both transports."""

from __future__ import annotations

import json

import httpx
import pytest
import websockets

from relay.testing.workload import mixed_workload
from tests.support.relay_api import PAST_MS

from .conftest import Served, ws_frames_until

MALFORMED = ("01", "007", "00", "+1", "1x", "1e3", "-0", "٣")


async def _epoch(served: Served) -> str:
    await served.relay.ingest(mixed_workload(5, seed=64, now_ms=PAST_MS))
    return await served.relay.store.get_feed_epoch()


@pytest.mark.parametrize("name", ["since", "until_seq", "limit", "Last-Event-ID", "token"])
async def test_a_seq_with_a_leading_zero_is_a_400_on_every_parameter(
    served: Served, name: str
) -> None:
    epoch = await _epoch(served)

    def request(value: str) -> tuple[dict[str, str], dict[str, str]]:
        if name == "Last-Event-ID":
            return {}, {"Last-Event-ID": value}
        if name == "token":
            return {"since": f"{epoch}.{value}"}, {}
        return {name: value}, {}

    async with httpx.AsyncClient(base_url=served.url) as http:
        for value in MALFORMED:
            if name == "Last-Event-ID" and not value.isascii():
                continue  # a header is ASCII
            params, headers = request(value)
            answer = await http.get("/changes", params=params, headers=headers)
            assert answer.status_code == 400, (name, value, answer.text)
            assert answer.headers["content-type"] == "application/json"
            assert isinstance(answer.json()["error"], str)
        params, headers = request("1")
        assert (await http.get("/changes", params=params, headers=headers)).status_code == 200


async def test_a_seq_with_a_leading_zero_is_an_err_over_the_websocket(served: Served) -> None:
    epoch = await _epoch(served)
    filters = [{"since": "01"}, {"since": f"{epoch}.01"}, {"until_seq": "01"}, {"limit": "01"}]
    async with websockets.connect(served.ws_url) as ws:
        for n, fields in enumerate(filters):
            await ws.send(json.dumps(["CHANGES", f"s{n}", fields]))
            [frame] = await ws_frames_until(ws, f"s{n}", "ERR")
            assert frame[2] == "ERR" and "error" in frame[3], (fields, frame)
        await ws.send(json.dumps(["CHANGES", "ok", {"since": "1", "until_seq": "2", "limit": 1}]))
        frames = await ws_frames_until(ws, "ok", "EOSE")
        assert frames[-1][2] == "EOSE"
