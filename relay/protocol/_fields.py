"""Field readers shared by the payload parsers.

Role: one place for "present, right JSON type, within the length limit"
checks and their error messages, so every payload kind reports the same way.
Every reader raises ``MalformedError`` naming the offending field.
"""

from __future__ import annotations

import re
from typing import TypeVar

from .errors import MalformedError
from .timestamps import parse_timestamp

MAX_DID_CHARS = 256
MAX_CID_CHARS = 256
MAX_NOTE_CHARS = 256
# PROTOCOL.md "Operation Schemas": ISO 8601, ms precision, UTC - the reference
# schema is ``z.iso.datetime({offset: false, precision: 3})``. One spelling per
# instant: ordering and head selection must not depend on how a time is written.
_CREATED_AT_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")

_T = TypeVar("_T", bound=str)


def _name(where: str | None, field: str) -> str:
    return f"{where}.{field}" if where else field


def check_fields(obj: dict[str, object], allowed: frozenset[str], where: str | None = None) -> None:
    """No field beyond ``allowed``: the reference schemas are strict objects, so
    an extra field makes another op than any v0.7.1 relay accepts."""
    for field in obj:
        if field not in allowed:
            # the name is the sender's text, echoed into a message that is
            # answered, logged and stored: NUL and other control characters
            # are shown escaped (no Postgres text holds NUL)
            shown = field if field.isprintable() else repr(field)
            raise MalformedError(f"unknown field {_name(where, shown)}")


def check_version(payload: dict[str, object]) -> None:
    """``version`` must be the JSON number 1 (``1.0`` is the same JSON number)."""
    version = payload.get("version")
    if type(version) not in (int, float) or version != 1:
        raise MalformedError("version must be 1")


def check_type(payload: dict[str, object], allowed: tuple[_T, ...]) -> _T:
    """``type`` must be one of ``allowed``; returns it typed as the literal."""
    value = payload.get("type")
    for literal in allowed:
        if value == literal and isinstance(value, str):
            return literal
    expected = " or ".join(f'"{a}"' for a in allowed)
    raise MalformedError(f"type must be {expected}")


def js_length(text: str) -> int:
    """``text``'s length as JavaScript counts it, and so the reference's Zod
    schemas whose limits PROTOCOL.md states: in UTF-16 code units, so a
    character beyond U+FFFF (an emoji) counts two."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def required_str(
    obj: dict[str, object],
    field: str,
    max_len: int,
    *,
    where: str | None = None,
    allow_empty: bool = False,
) -> str:
    """A present, string-valued field of at most ``max_len`` characters (``js_length``)."""
    value = obj.get(field)
    if not isinstance(value, str):
        raise MalformedError(f"{_name(where, field)} must be a string")
    if js_length(value) > max_len:
        raise MalformedError(f"{_name(where, field)} exceeds {max_len} characters")
    if not value and not allow_empty:
        raise MalformedError(f"{_name(where, field)} must not be empty")
    return value


def nullable_str(obj: dict[str, object], field: str, max_len: int) -> str | None:
    """A field that must be present and is either null or a bounded string."""
    if field not in obj:
        raise MalformedError(f"{field} is required (use null for none)")
    value = obj[field]
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedError(f"{field} must be a string or null")
    if js_length(value) > max_len:
        raise MalformedError(f"{field} exceeds {max_len} characters")
    return value


def optional_str(obj: dict[str, object], field: str) -> str | None:
    """A field that may be absent or null; otherwise it must be a string."""
    value = obj.get(field)
    if value is None or isinstance(value, str):
        return value
    raise MalformedError(f"{field} must be a string")


def created_at(payload: dict[str, object]) -> tuple[str, int]:
    """The ``createdAt`` string (``YYYY-MM-DDTHH:MM:SS.sssZ``) and its epoch milliseconds."""
    value = payload.get("createdAt")
    if not isinstance(value, str):
        raise MalformedError("createdAt must be a string")
    if _CREATED_AT_RE.fullmatch(value) is None:
        raise MalformedError(
            "createdAt must be ISO 8601 in UTC with milliseconds (2026-03-07T00:00:00.000Z)"
        )
    return value, parse_timestamp(value)
