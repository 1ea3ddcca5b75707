"""A peer's response body, inflated here with a bound (``gzip`` or
``deflate``, one layer), for the clients of ``peer`` that read a body.

httpx would inflate each network chunk whole before a caller can count a
byte: a 64 KiB chunk of gzip is 64 MiB, and a second layer (``gzip,
gzip``, which httpx decodes too) makes a 1 KiB body a gigabyte. So the
clients ask only for the encodings below, read raw bytes and inflate them
here, at most ``step`` bytes at a time; any other ``Content-Encoding``
(several layers included) is refused.

Errors are ``EncodingError`` (a ``ValueError``); each client maps it onto
its own error tree. Not checked: what the inflated bytes are.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx

ACCEPTED_ENCODINGS = "gzip, deflate"
INFLATE_STEP = 64 * 1024  # bytes one call to the inflater produces at most


class EncodingError(ValueError):
    """An unsupported, corrupt or truncated ``Content-Encoding`` body."""


def decompressor(headers: httpx.Headers) -> zlib._Decompress | None:
    """A zlib decompressor for ``Content-Encoding`` in ``headers`` (None: identity)."""
    values = headers.get_list("content-encoding", split_commas=True)
    codings = [v.strip().lower() for v in values if v.strip().lower() not in ("", "identity")]
    if not codings:
        return None
    if codings == ["gzip"] or codings == ["x-gzip"]:
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if codings == ["deflate"]:
        return zlib.decompressobj(zlib.MAX_WBITS)  # zlib-wrapped, as RFC 9110 defines it
    raise EncodingError(f"unsupported content-encoding {', '.join(codings)[:80]!r}")


def inflate(inflater: zlib._Decompress, raw: bytes, max_length: int) -> bytes:
    """At most ``max_length`` bytes of ``raw`` inflated (the rest stays in
    ``inflater.unconsumed_tail``)."""
    try:
        return inflater.decompress(raw, max_length)
    except zlib.error as exc:
        raise EncodingError(f"compressed response is corrupt: {exc}") from exc


async def inflated(response: httpx.Response, step: int = INFLATE_STEP) -> AsyncIterator[bytes]:
    """``response``'s body, decoded, in pieces of at most ``step`` bytes
    (a raw piece as it came when the body is not compressed)."""
    inflater = decompressor(response.headers)
    received = False
    async for raw in response.aiter_raw():
        received = received or bool(raw)
        if inflater is None:
            yield raw
            continue
        data = raw
        while True:
            piece = inflate(inflater, data, step)
            if piece:
                yield piece
            data = inflater.unconsumed_tail
            if not data and len(piece) < step:  # a full piece may leave output behind
                break
    if inflater is not None and received and not inflater.eof:
        raise EncodingError("compressed response is truncated")
