"""The response cap of the peer client counts *decoded* bytes as they are
inflated: a compressed body of a few kilobytes that inflates to hundreds
of megabytes (a gzip bomb, nested gzip layers) is a typed ``PeerError``
without the client ever holding much more than the cap in memory."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest

from peer import HttpPeerClient, PeerLimits, PeerMalformedPage, PeerResponseTooLarge

from .hostile_http import Answer, encoded, raw_peer

CAP = 64 * 1024
INFLATED = 64 * 1024 * 1024


def answering(body: bytes, encoding: str) -> Answer:
    return encoded(body, encoding, "application/json")


@pytest.mark.parametrize(
    ("encoding", "layers"), [("gzip", 1), ("gzip, gzip", 2)], ids=["gzip", "nested-gzip"]
)
async def test_a_gzip_bomb_is_cut_off_at_the_cap_while_inflating(
    encoding: str, layers: int
) -> None:
    body = b"\x00" * INFLATED
    for _ in range(layers):
        body = gzip.compress(body, 9)
    async with raw_peer(answering(body, encoding)) as url:
        client = HttpPeerClient(limits=PeerLimits(max_response_bytes=CAP))
        tracemalloc.start()
        try:
            with pytest.raises(PeerMalformedPage) as info:  # too large, or refused outright
                await client.get_operation_log(url)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await client.aclose()
    assert peak < 8 * 1024 * 1024, f"{peak} bytes held for a {CAP}-byte cap"
    assert layers > 1 or isinstance(info.value, PeerResponseTooLarge)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compressed_page_within_the_cap_is_read(encoding: str) -> None:
    page = b'{"entries": [], "cursor": null}'
    body = gzip.compress(page) if encoding == "gzip" else zlib.compress(page)
    async with raw_peer(answering(body, encoding)) as url:
        client = HttpPeerClient(limits=PeerLimits(max_response_bytes=CAP))
        try:
            assert (await client.get_operation_log(url)).entries == ()
        finally:
            await client.aclose()


async def test_a_corrupt_compressed_body_is_a_malformed_page() -> None:
    async with raw_peer(answering(b"not gzip at all", "gzip")) as url:
        client = HttpPeerClient()
        try:
            with pytest.raises(PeerMalformedPage):
                await client.get_operation_log(url)
        finally:
            await client.aclose()
