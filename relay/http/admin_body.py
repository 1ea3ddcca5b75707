"""Admin request bodies (``relay.http.admin``): a JSON object of the fields
the route names, each read as one type.

Invariants: an empty body reads as ``{}``; anything else that is not a
JSON object, or that holds a field the route does not take, is a 400
(``{"error": ...}`` naming the fields), so a misspelt ``"Purge"`` never
becomes a ban without a purge. A null field reads as an absent one. Strings
are refused when a store cannot keep them (NUL, lone surrogates).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from relay.protocol.untrusted import is_text, json_value

from .context import relay_of
from .errors import ApiError
from .params import read_body_capped

__all__ = ["read_body", "read_field"]

MAX_NAMED_FIELDS = 5  # unknown fields named in a 400; the rest are counted
MAX_FIELD_NAME_CHARS = 64


async def read_body(request: Request, fields: frozenset[str]) -> dict[str, Any]:
    """The JSON object body (``{}`` when empty); 400 when malformed or when it
    holds a field not in ``fields``: a misspelt field would otherwise be
    ignored and the action done without it."""
    raw = await read_body_capped(request, relay_of(request).config.max_body_bytes)
    if not raw.strip():
        return {}
    try:
        body = json_value(raw)
    except ValueError:
        raise ApiError(400, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    unknown = sorted(name for name in body if name not in fields)
    if unknown:
        raise ApiError(400, unknown_fields_error(unknown, fields))
    return body


def unknown_fields_error(unknown: list[str], fields: frozenset[str]) -> str:
    # Names are outside text: JSON-quoted (a lone surrogate or NUL comes out
    # escaped, so the answer can carry it), cut, and only the first few named.
    named = [json.dumps(name[:MAX_FIELD_NAME_CHARS]) for name in unknown[:MAX_NAMED_FIELDS]]
    more = len(unknown) - len(named)
    listed = ", ".join(named) + (f" and {more} more" if more else "")
    known = ", ".join(sorted(fields))
    return f"unknown field{'s' if len(unknown) > 1 else ''} {listed} (this route takes: {known})"


def read_field(body: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """``body[name]`` of type ``kind`` (a number is a non-negative int, not a bool);
    ``default`` when absent or null."""
    value = body.get(name)
    if value is None:
        return default
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ApiError(400, f"{name} must be a non-negative integer")
    elif not isinstance(value, kind):
        raise ApiError(400, f"{name} must be a {kind.__name__}")
    if isinstance(value, str) and "\x00" in value:  # Postgres text cannot hold it
        raise ApiError(400, f"{name} must not contain NUL")
    if isinstance(value, str) and not is_text(value):  # JSON's "\ud800": no store, no answer
        raise ApiError(400, f"{name} must be Unicode text (it holds a lone surrogate)")
    return value
