"""The serving side of reconciliation: one stateless Negentropy round over
the index (optionally a createdAt window of it), and ops by CID in
transfer order.

Every bad input is a ``SyncRequestError`` with its HTTP status and leaves
nothing behind: a round reads the index and writes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from relay.protocol import is_cid
from relay.protocol.negentropy import (
    INFINITY,
    Negentropy,
    NegentropyError,
    NegentropyOptions,
    Storage,
    StorageWindow,
)
from relay.protocol.untrusted import ascii_decimal
from relay.rules.transfer_order import transfer_order
from stores.base import OperationRecord

from .index import FingerprintIndex
from .pacing import run_paced

MAX_FETCH_CIDS = 1000
# Ops are up to 64 KiB: 1000 could be 64 MiB held and encoded for one small
# request. An answer holds at most this (the initiator's response cap), read
# a chunk at a time; past it the request is a 413 and the asker halves it.
MAX_FETCH_ANSWER_BYTES = 8 * 1024 * 1024
FETCH_READ_CHUNK = 100
_JSON_ITEM_BYTES = 3  # the quotes and comma around each token or CID in the answer
MIN_FRAME_LIMIT = 4096
# Rounds that pause (more than 256 ranges) running at once; one more is
# refused (a 503). Every pause of the loop runs a step (~4 ms) of each, so
# with many at once every other request waits: 32 queries of 64 KiB made a
# 20-op POST /operations wait ~300 ms. A round done in one step never waits.
MAX_LONG_ROUNDS = 2


class SyncRequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Window:
    """createdAt in [since, until) milliseconds; the defaults are everything."""

    since: int = 0
    until: int = INFINITY

    @property
    def is_everything(self) -> bool:
        return self.since == 0 and self.until == INFINITY


def parse_window(params: Mapping[str, str]) -> Window:
    since, until = _millis(params, "since", 0), _millis(params, "until", INFINITY)
    if since > until:
        raise SyncRequestError(400, "since must not be after until")
    return Window(since, until)


def parse_frame_limit(params: Mapping[str, str], ours: int) -> int:
    """The smaller of our frame limit and the client's (0 = none)."""
    raw = params.get("frameLimit")
    if raw is None:
        return ours
    theirs = ascii_decimal(raw)
    if theirs is None or 0 < theirs < MIN_FRAME_LIMIT:
        raise SyncRequestError(400, f"frameLimit must be 0 or an integer >= {MIN_FRAME_LIMIT}")
    limits = [x for x in (ours, theirs) if x]
    return min(limits) if limits else 0


def _millis(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    millis = ascii_decimal(raw)
    if millis is None or millis >= INFINITY:
        raise SyncRequestError(400, f"{name} must be a Unix time in milliseconds")
    return millis


async def answer_round(
    index: FingerprintIndex,
    message: bytes,
    window: Window,
    frame_limit: int,
    scoped: Storage | None = None,
    pausing: contextlib.AbstractContextManager[None] | None = None,
) -> bytes:
    """One round over the whole index, or over ``scoped`` (a scope's items,
    a set of its own, which may grow in place as the index does); ``pausing`` is entered before
    the round first lets the loop run other work (``run_paced``)."""
    if scoped is None:
        await index.ready()

    def view() -> Storage:
        items = scoped if scoped is not None else index.tree  # a purge swaps the tree
        return items if window.is_everything else StorageWindow(items, window.since, window.until)

    options = NegentropyOptions(frame_size_limit=frame_limit, random_splits=True)
    negentropy = Negentropy(view(), options)
    try:
        steps = negentropy.respond_in_steps(message)
        return await run_paced(steps, negentropy, view, pausing)
    except NegentropyError as exc:
        raise SyncRequestError(400, f"malformed negentropy message: {exc}") from exc


def parse_cids(data: object) -> list[str]:
    """The ``{"cids": [...]}`` body of POST /sync/operations."""
    if not isinstance(data, dict) or not isinstance(data.get("cids"), list):
        raise SyncRequestError(400, 'request body must be {"cids": [...]}')
    cids = data["cids"]
    if len(cids) > MAX_FETCH_CIDS:
        raise SyncRequestError(400, f"at most {MAX_FETCH_CIDS} cids per request")
    if not all(isinstance(c, str) and is_cid(c) for c in cids):
        raise SyncRequestError(400, "every cid must be a dag-cbor CIDv1 string")
    return list(dict.fromkeys(cids))


class OperationReader(Protocol):
    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]: ...


async def read_answer(store: OperationReader, cids: Sequence[str]) -> dict[str, OperationRecord]:
    """The ops of ``cids`` we hold, read ``FETCH_READ_CHUNK`` at a time;
    ``SyncRequestError`` (413) once their answer would pass
    ``MAX_FETCH_ANSWER_BYTES`` (so at most one chunk more is ever held)."""
    found: dict[str, OperationRecord] = {}
    size = len('{"operations":[],"missing":[]}') + len(cids) * _JSON_ITEM_BYTES
    for at in range(0, len(cids), FETCH_READ_CHUNK):
        chunk = cids[at : at + FETCH_READ_CHUNK]
        records = await store.read_operations(chunk)
        size += sum(len(r.jws_token) for r in records.values())
        size += sum(len(c) for c in chunk if c not in records)  # named as missing
        if size > MAX_FETCH_ANSWER_BYTES:
            raise SyncRequestError(
                413, f"the ops asked for pass {MAX_FETCH_ANSWER_BYTES} bytes; ask for fewer cids"
            )
        found.update(records)
    return found


def ordered_operations(
    found: Mapping[str, OperationRecord], asked: Sequence[str]
) -> tuple[list[str], list[str]]:
    """(tokens in transfer order, the asked CIDs we do not hold)."""
    ops = transfer_order(found[c] for c in asked if c in found)
    return [op.jws_token for op in ops], [c for c in asked if c not in found]


__all__ = [
    "MAX_FETCH_ANSWER_BYTES",
    "MAX_LONG_ROUNDS",
    "SyncRequestError",
    "Window",
    "answer_round",
    "ordered_operations",
    "parse_cids",
    "parse_frame_limit",
    "parse_window",
    "read_answer",
]
