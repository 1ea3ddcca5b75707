"""The replication ledger's rows, shared by every backend: the bound on
pending tokens and the JSON form of ``diagnostics`` (the durable stores keep
it as text; the memory store round-trips it the same way, so a caller never
shares a mutable dict with the store)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from stores.base import LINK_PENDING_MAX, LinkRecord


def bounded(record: LinkRecord) -> LinkRecord:
    """``record`` with at most ``LINK_PENDING_MAX`` pending tokens (the oldest kept)."""
    if len(record.pending_tokens) <= LINK_PENDING_MAX:
        return record
    return replace(record, pending_tokens=record.pending_tokens[:LINK_PENDING_MAX])


def dump_diagnostics(diagnostics: dict[str, Any]) -> str:
    return json.dumps(diagnostics, sort_keys=True, separators=(",", ":"))


def load_diagnostics(text: str | None) -> dict[str, Any]:
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


def pending_text(tokens: tuple[str, ...]) -> str:
    return json.dumps(list(tokens), separators=(",", ":"))


def pending_tuple(text: str | None) -> tuple[str, ...]:
    value = json.loads(text) if text else []
    return tuple(str(t) for t in value) if isinstance(value, list) else ()
