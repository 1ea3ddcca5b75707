"""Peer transport: how one relay talks to another (WEB-RELAY.md "Peering").

``PeerClient`` is the seam the peering logic (``relay/peering``) types
against; ``HttpPeerClient`` is the default implementation over one shared
``httpx.AsyncClient``; ``AsgiMeshTransport`` routes requests to in-process
ASGI apps so tests can wire real relays together without sockets.

This package imports nothing from the relay engine: only its own base.
"""

from peer.asgi import AsgiMeshTransport
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
