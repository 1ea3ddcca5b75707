"""The relay a request is served by (set on ``app.state`` by ``build_app``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection

if TYPE_CHECKING:
    from relay.engine import Relay


def relay_of(request: HTTPConnection) -> Relay:
    return request.app.state.relay  # type: ignore[no-any-return]
