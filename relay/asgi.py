"""The composition root for served relays, and ``relay.asgi:app``.

``hypercorn relay.asgi:app`` (or any ASGI host) serves a relay configured
from ``DFOS_RELAY_*`` environment variables alone (see ``relay.settings``);
``dfos-relay serve --workers N`` uses the same path in each worker. The
module-level ``app`` builds the relay on its first call (the lifespan
startup), not on import, so importing this module has no side effects.
``create_app(env)`` is the explicit factory.

Here, and only here, concrete backends are chosen: the store from its URL
(``stores.factory``), the HTTP peer client and the peering service.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relay.compose import create_relay
from relay.engine import Relay
from relay.observability.logging import configure_logging
from relay.settings import ENV_PREFIX, ServeSettings, SettingsError, parse_settings

if TYPE_CHECKING:
    from relay.peering.api import PeeringService
    from stores.base import RelayStore

__all__ = ["app", "create_app", "relay_from_settings", "store_from_url"]


def store_from_url(url: str, source: str = "--store") -> RelayStore:
    """An unopened store for ``url``; bad URLs raise ``SettingsError``."""
    try:
        from stores.factory import open_store_from_url
    except ImportError:
        if url.startswith("memory:"):
            from stores.memory import MemoryStore

            return MemoryStore()
        raise SettingsError(source, f"this build has no store factory for {url!r}") from None
    from stores.base import StoreError

    try:
        return open_store_from_url(url)
    except (ValueError, StoreError) as exc:
        raise SettingsError(source, str(exc)) from None


def peering_from_settings(settings: ServeSettings) -> PeeringService | None:
    if not settings.peers:
        return None
    try:
        from relay.peering.service import build_peering
    except ImportError:
        raise SettingsError("--peer", "this build has no peering service") from None
    # No client passed: peering builds (and on stop closes) its HttpSyncClient.
    return build_peering(settings.peers, None, config=settings.peering_config())


def relay_from_settings(settings: ServeSettings, *, store_source: str) -> Relay:
    """Compose (no I/O) the relay that ``settings`` describe; a bad store URL
    is blamed on ``store_source`` (the flag or variable it came from)."""
    return create_relay(
        store_from_url(settings.store, store_source),
        config=settings.relay_config(),
        peering=peering_from_settings(settings),
    )


def create_app(env: Mapping[str, str]) -> Any:
    """The ASGI app of a relay configured by ``DFOS_RELAY_*`` in ``env``.
    Of several processes on one store, the holder of its pull lease follows
    and polls peers (``relay.peering.lead``)."""
    settings = parse_settings(env)
    configure_logging(settings.log_level)
    return relay_from_settings(settings, store_source=ENV_PREFIX + "STORE").app


class _RelayFromEnvironment:
    """The ASGI app of ``hypercorn relay.asgi:app``, built on its first call.

    A real module attribute (hypercorn's loader evaluates ``app`` in the
    module's namespace and never consults a module ``__getattr__``), yet
    importing this module still reads no environment and opens nothing.
    """

    def __init__(self) -> None:
        self._app: Any = None

    def _built(self) -> Any:
        if self._app is None:
            self._app = create_app(os.environ)
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._built()(scope, receive, send)


app = _RelayFromEnvironment()
