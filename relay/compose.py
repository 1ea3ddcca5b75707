"""``create_relay()``: the library's composition root.

It wires a store, the engine, peering and the HTTP app together and does no
I/O; the app's lifespan (or ``async with relay.running()``) starts the relay.
This module sits above every layer it composes (engine, http, peering), so
none of them needs to import another upward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from relay.config import RelayConfig
from relay.engine import Relay, wall_clock_ms
from relay.http.app import build_app
from relay.ingest.pipeline import Clock

if TYPE_CHECKING:
    from relay.peering.api import PeeringService
    from stores.base import RelayIdentityRecord, RelayStore

__all__ = ["create_relay"]


def create_relay(
    store: RelayStore | None = None,
    *,
    content: bool | None = None,
    log: bool | None = None,
    config: RelayConfig | None = None,
    identity: RelayIdentityRecord | None = None,
    peers: Sequence[object] = (),
    peer_client: object | None = None,
    peering: PeeringService | None = None,
    clock: Clock = wall_clock_ms,
) -> Relay:
    """Compose a relay. No I/O happens until the app's lifespan starts it.

    ``store`` defaults to a fresh ``MemoryStore``. ``content``/``log``
    override the matching config switches. ``peers`` are ``PeerConfig``
    values (or URLs) served through ``peer_client``.
    """
    cfg = config or RelayConfig()
    if content is not None:
        cfg = replace(cfg, content=content)
    if log is not None:
        cfg = replace(cfg, log=log)
    if peering is None and peers:
        from relay.peering.service import build_peering

        peering = build_peering(peers, peer_client)
    if store is None:
        from stores.memory import MemoryStore

        store = MemoryStore()
    return Relay(store, cfg, clock, identity, peering, build_app)
