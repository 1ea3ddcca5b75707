"""dfos-relay: a DFOS v0.7.1 web relay.

``create_relay()`` returns a ``Relay`` whose ``.app`` is a Starlette ASGI
app serving the proof plane (and, optionally, the content plane).
"""

from relay.config import RelayConfig
from relay.engine import Relay, create_relay
from relay.version import RELAY_VERSION

__all__ = ["RELAY_VERSION", "Relay", "RelayConfig", "create_relay"]
__version__ = RELAY_VERSION
