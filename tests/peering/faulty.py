"""Faulty *remote* peers: tiny Starlette apps standing in for a misbehaving
relay on the other end of the wire (the relay under test is always real)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

FAULTS = (
    "timeout",
    "status-500",
    "malformed-json",
    "deep-json",
    "wrong-shape",
    "huge-page",
    "tampered",
    "nul-cursor",
)


def tamper(token: str) -> str:
    """Flip one character of the signature: same payload, invalid signature."""
    head, payload, sig = token.split(".")
    flipped = "A" if sig[5] != "A" else "B"
    return ".".join((head, payload, sig[:5] + flipped + sig[6:]))


def faulty_peer(fault: str, tokens: Sequence[str] = (), hang_s: float = 30.0) -> Starlette:
    """Answers every peering call (chain logs, global log, POST) with ``fault``.

    ``tampered`` serves ``tokens`` with broken signatures as a valid page.
    """

    async def answer(request: Request) -> Response:
        if fault == "timeout":
            await asyncio.sleep(hang_s)
            return JSONResponse({"entries": [], "cursor": None})
        if fault == "status-500":
            return JSONResponse({"error": "boom"}, status_code=500)
        if fault == "malformed-json":
            return Response(b'{"entries": [', media_type="application/json")
        if fault == "deep-json":  # valid JSON, nested deeper than a parser recurses
            return Response(b"[" * 5000 + b"]" * 5000, media_type="application/json")
        if fault == "wrong-shape":
            return JSONResponse({"entries": "nope", "cursor": 7})
        if fault == "huge-page":
            blob = "x" * (4 * 1024 * 1024)
            body = json.dumps({"entries": [{"cid": "bafy", "jwsToken": blob}], "cursor": None})
            return Response(body.encode(), media_type="application/json")
        if fault == "nul-cursor":  # a position no store should keep
            return JSONResponse({"entries": [], "cursor": "bafy\u0000x"})
        if fault == "tampered":
            if request.method == "POST":
                return JSONResponse({"results": []})
            entries = [{"cid": _cid(t), "jwsToken": tamper(t)} for t in tokens]
            return JSONResponse({"entries": entries, "cursor": None})
        raise AssertionError(fault)

    routes = [
        Route("/log", answer, methods=["GET"]),
        Route("/identities/{did}/log", answer, methods=["GET"]),
        Route("/content/{cid}/log", answer, methods=["GET"]),
        Route("/operations", answer, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _cid(token: str) -> str:
    from relay.protocol import decode_jws

    cid = decode_jws(token).header_cid
    assert isinstance(cid, str)
    return cid
