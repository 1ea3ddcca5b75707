"""Each request to a peer has a deadline for the whole exchange, not only
between bytes: a peer that trickles a byte at a time, each inside the read
timeout, is a ``PeerTimeout`` once the deadline passes."""

from __future__ import annotations

import asyncio

import pytest

from peer import HttpPeerClient, PeerLimits, PeerTimeout

from .hostile_http import head, raw_peer


async def trickle(writer: asyncio.StreamWriter) -> None:
    writer.write(head({"content-type": "application/json", "content-length": "1000000"}))
    while True:  # one byte every 0.1 s: never a read timeout
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(0.1)


async def test_a_trickling_peer_hits_the_request_deadline() -> None:
    limits = PeerLimits(read_timeout_s=1.0, request_deadline_s=1.5)
    async with raw_peer(trickle) as url:
        client = HttpPeerClient(limits=limits)
        started = asyncio.get_running_loop().time()
        try:
            with pytest.raises(PeerTimeout) as info:
                await asyncio.wait_for(client.get_operation_log(url), 10)
        finally:
            await client.aclose()
    assert asyncio.get_running_loop().time() - started < 5
    assert info.value.peer_url == url
