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

import logging
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relay.observability.logging import configure_logging
from relay.settings import ENV_PREFIX, ServeSettings, SettingsError, parse_settings

if TYPE_CHECKING:
    from relay.engine import Relay
    from relay.peering.api import PeeringService
    from stores.base import RelayStore

__all__ = ["app", "create_app", "failure_line", "relay_from_settings", "store_from_url"]

log = logging.getLogger("dfos_relay.asgi")


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
    store = store_from_url(settings.store, store_source)
    peering = peering_from_settings(settings)
    # here, not on import, and after a bad store URL has failed: the
    # commands that only open a store, and usage errors, do not load it
    from relay.compose import create_relay

    return create_relay(store, config=settings.relay_config(), peering=peering)


def create_app(env: Mapping[str, str]) -> Any:
    """The ASGI app of a relay configured by ``DFOS_RELAY_*`` in ``env``.
    Of several processes on one store, the holder of its pull lease follows
    and polls peers (``relay.peering.lead``)."""
    settings = parse_settings(env)
    configure_logging(settings.log_level)
    return relay_from_settings(settings, store_source=ENV_PREFIX + "STORE").app


def failure_line(exc: BaseException | str) -> str:
    """The last meaningful line of a start-up failure, without module paths.

    Starlette reports a lifespan failure with the whole traceback as its
    message (and hypercorn wraps that again); the reader wants the final
    ``message`` only."""
    text = exc if isinstance(exc, str) else str(exc)
    lines = [line.strip(" '\"") for line in text.splitlines() if line.strip(" '\"")]
    last = lines[-1] if lines else (text if isinstance(exc, str) else type(exc).__name__)
    last = re.sub(r"^Lifespan failure in \w+\. '", "", last)  # hypercorn's wrapping
    return re.sub(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Failure): ", "", last)


class _RelayFromEnvironment:
    """The ASGI app of ``hypercorn relay.asgi:app``, built on its first call.

    A real module attribute (hypercorn's loader evaluates ``app`` in the
    module's namespace and never consults a module ``__getattr__``), yet
    importing this module still reads no environment and opens nothing.
    A bad setting or a store that cannot open fails the lifespan start-up
    with one line: an app that raises there instead is taken by hypercorn
    for one without lifespan support, and served without a relay.
    """

    def __init__(self) -> None:
        self._app: Any = None

    def _built(self) -> Any:
        if self._app is None:
            self._app = create_app(os.environ)
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        await self._built()(scope, receive, send)

    async def _lifespan(self, scope: Any, receive: Any, send: Any) -> None:
        problem: str | None = None
        try:
            built = self._built()
        except SettingsError as exc:
            problem = str(exc)  # reported outside the handler: no chained traceback
        if problem is not None:
            await receive()  # lifespan.startup
            await _start_up_failed(send, problem)
            return

        async def one_line(message: Any) -> None:
            if message.get("type") == "lifespan.startup.failed":
                await _start_up_failed(send, failure_line(str(message.get("message", ""))))
            else:
                await send(message)

        try:
            await built(scope, receive, one_line)
        except Exception as exc:
            # the host's own failure names the cause: not the store's traceback again
            exc.__suppress_context__ = True
            raise


async def _start_up_failed(send: Any, line: str) -> None:
    log.error("relay.asgi:app cannot start: %s", line)
    await send({"type": "lifespan.startup.failed", "message": line})


app = _RelayFromEnvironment()
