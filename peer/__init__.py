"""Peer transport: how one relay talks to another (WEB-RELAY.md "Peering").

``PeerClient`` is the seam the peering logic (``relay/peering``) types
against; ``HttpPeerClient`` is the default implementation over one shared
``httpx.AsyncClient``; ``AsgiMeshTransport`` routes requests to in-process
ASGI apps so tests can wire real relays together without sockets.

This package imports nothing from the relay engine: only its own base.
The transports load on first use, so what only needs the seam and its
values (``relay.settings`` parsing ``--peer``, and with it every
``dfos-relay`` command line) does not pull in httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from peer.base import (
    PeerBadStatus,
    PeerBusy,
    PeerClient,
    PeerConfig,
    PeerError,
    PeerInvalidOperations,
    PeerLogEntry,
    PeerLogPage,
    PeerMalformedPage,
    PeerResponseTooLarge,
    PeerTimeout,
    PeerUnreachable,
    normalize_peer_url,
    parse_peer_config,
    parse_peer_configs,
)

if TYPE_CHECKING:
    from peer.asgi import AsgiMeshTransport
    from peer.http import HttpPeerClient, PeerLimits

__all__ = [
    "AsgiMeshTransport",
    "HttpPeerClient",
    "PeerBadStatus",
    "PeerBusy",
    "PeerClient",
    "PeerConfig",
    "PeerError",
    "PeerInvalidOperations",
    "PeerLimits",
    "PeerLogEntry",
    "PeerLogPage",
    "PeerMalformedPage",
    "PeerResponseTooLarge",
    "PeerTimeout",
    "PeerUnreachable",
    "normalize_peer_url",
    "parse_peer_config",
    "parse_peer_configs",
]

_LAZY = {
    "AsgiMeshTransport": "peer.asgi",
    "HttpPeerClient": "peer.http",
    "PeerLimits": "peer.http",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'peer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
