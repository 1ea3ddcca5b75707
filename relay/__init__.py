"""dfos-relay: a DFOS v0.7.1 web relay.

``create_relay()`` returns a ``Relay`` whose ``.app`` is a Starlette ASGI
app serving the proof plane (and, optionally, the content plane).

The names below load on first use, so importing a pure part of the package
(``relay.protocol`` in a Spark executor, say) does not pull in the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relay.version import RELAY_VERSION

if TYPE_CHECKING:
    from relay.compose import create_relay
    from relay.config import RelayConfig
    from relay.engine import Relay

__all__ = ["RELAY_VERSION", "Relay", "RelayConfig", "create_relay"]
__version__ = RELAY_VERSION

_LAZY = {
    "create_relay": "relay.compose",
    "Relay": "relay.engine",
    "RelayConfig": "relay.config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'relay' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
