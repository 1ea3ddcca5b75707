"""An importable ASGI app for subprocess relays (crash tests, benchmarks):
``hypercorn tests.support.app_from_env:app`` serves a relay on the store
named by ``DFOS_STORE_URL`` (see ``stores.factory``). The store is opened by
the app's lifespan, so a bad store URL fails startup."""

from __future__ import annotations

import os

from relay import create_relay
from stores.factory import open_store_from_url

relay = create_relay(open_store_from_url(os.environ.get("DFOS_STORE_URL", "memory://")))
app = relay.app
