"""``GET /peers`` (additive, read-only): the replication ledger per
configured peer (and each peer discovery learned, marked ``discovered``),
with each link's state, tokens, lag and last error.

Who may read it: with no operator configured (no ``--admin-did``), only
loopback clients (127.0.0.0/8, ::1; behind a trusted proxy, the forwarded
client address counts, so a local reverse proxy does not make every
caller local). Once administration is configured, every caller needs a
valid operator token, from loopback too: the operator has a way to
authenticate, so locality is no longer the test. Anyone else gets a 403.

The link's JSON shape (``relay.http.wire.link``) is also what
``dfos-relay peers --json`` prints.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from relay.admin import AdminRefused
from relay.limits import client_ip
from relay.peering.api import PeerState
from relay.peering.link_view import LinkView

from . import wire
from .admin import admin_caller
from .context import relay_of
from .errors import ApiError


def is_loopback(address: str | None) -> bool:
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def peers_json(states: list[PeerState], views: list[LinkView]) -> list[dict[str, Any]]:
    """Configured peers in order, then the peers discovery learned (marked
    ``discovered`` with the DID they were advertised with),
    then peers only the ledger still names."""
    peers: dict[str, dict[str, Any]] = {}
    for state in states:
        entry: dict[str, Any] = {"url": state.url, "behaviours": list(state.behaviours)}
        if state.discovered_did is not None:
            entry["discovered"] = {"did": state.discovered_did}
        peers[state.url] = entry | {"links": []}
    for view in views:
        url = view.record.peer_url
        entry = peers.setdefault(url, {"url": url, "behaviours": [], "links": []})
        link = wire.link(view)
        del link["peer"]
        entry["links"].append(link)
    return list(peers.values())


async def _admit(request: Request) -> None:
    relay = relay_of(request)
    if relay.config.admin_dids:
        try:
            await admin_caller(request)
        except AdminRefused as exc:
            raise ApiError(403, f"GET /peers needs an operator token: {exc}") from None
        return
    peer = request.client.host if request.client else None
    forwarded = request.headers.get("x-forwarded-for")
    if not is_loopback(client_ip(peer, forwarded, relay.config.trusted_proxies)):
        raise ApiError(
            403, "GET /peers answers loopback clients only (or operators, once configured)"
        )


async def get_peers(request: Request) -> JSONResponse:
    await _admit(request)
    relay = relay_of(request)
    return JSONResponse({"peers": peers_json(relay.peer_states(), relay.peer_links())})
