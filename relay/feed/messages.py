"""What a subscription yields, before any transport frames it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relay.feed.tokens import ProgressToken
from stores.base import FeedEntry


@dataclass(frozen=True, slots=True)
class Status:
    mode: str
    snapshot_seq: int | None
    epoch: str
    stream_id: str
    head_seq: int

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode,
            "streamId": self.stream_id,
            "epoch": self.epoch,
            "headSeq": self.head_seq,
        }
        if self.snapshot_seq is not None:
            out["snapshotSeq"] = self.snapshot_seq
        return out


@dataclass(frozen=True, slots=True)
class Snapshot:
    item: dict[str, Any]


class Event:
    """One op as every subscriber receives it: the entry, its token, its
    JSON body (encoded once) and each transport's framing (computed once,
    by the first subscriber that sends it; see ``relay.feed.cache``)."""

    __slots__ = ("_framed", "closure", "entry", "json", "seq", "token")

    def __init__(self, entry: FeedEntry, epoch: str, position: int | None = None) -> None:
        """``position``: a scoped subscription sends a closure op behind its
        own seq, ahead of its dependant; its token resumes just before the
        dependant (everything in scope up to there has then been sent)."""
        self.entry = entry
        self.seq = entry.seq
        self.closure = position is not None
        self.token = ProgressToken(epoch, entry.seq if position is None else position, entry.cid)
        self.json = json.dumps(self.to_json())
        self._framed: dict[str, bytes] = {}

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        out: dict[str, Any] = {
            "seq": e.seq,
            "token": self.token.compact(),
            "cid": e.cid,
            "kind": e.kind,
            "chainId": e.chain_id,
            "jwsToken": e.jws_token,
        }
        if self.closure:
            out["closure"] = True  # additive: a dependency sent late, before its dependant
        return out

    def framed(self, transport: str, frame: Callable[[Event], bytes]) -> bytes:
        """This event framed for ``transport``; ``frame`` runs once per event."""
        out = self._framed.get(transport)
        if out is None:
            out = self._framed[transport] = frame(self)
        return out

    def size(self) -> int:
        """Roughly the bytes it holds: the JWS, its JSON, and one framing."""
        return len(self.entry.jws_token) + 2 * len(self.json)


@dataclass(frozen=True, slots=True)
class Events:
    """Consecutive matching events, sent together; ``end`` is the last seq
    scanned (events filtered out count as passed once these are sent)."""

    events: list[Event]
    end: int


@dataclass(frozen=True, slots=True)
class Eose:
    """End of stored events: ``token`` is the checkpoint to persist."""

    token: ProgressToken


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Nothing new for a while (live): transports send a keep-alive."""


FeedMessage = Status | Snapshot | Events | Eose | Heartbeat
