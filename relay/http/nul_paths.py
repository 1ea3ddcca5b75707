"""A path holding NUL names no resource: no CID, DID, content id or blob
ref contains one. Answered 404 here, before a handler hands the id to a
store, because Postgres refuses NUL in text outright (a 500 otherwise) while
SQLite and memory just find nothing."""

from __future__ import annotations

import re
from typing import Any

from .errors import error_response

# Routes that check their ids before any read and answer in their own shape
# (DID resolution's invalidDid, the op status route's 400).
_SELF_VALIDATING = re.compile(r"/1\.0/identifiers/|/operations/[^/]*/status$")


class NulPathGuard:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and "\x00" in path and not _SELF_VALIDATING.match(path):
            await error_response(404, "not found")(scope, receive, send)
            return
        await self.app(scope, receive, send)
