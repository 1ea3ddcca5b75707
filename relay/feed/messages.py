"""What a subscription yields, before any transport frames it."""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Event:
    entry: FeedEntry
    token: ProgressToken

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        return {
            "seq": e.seq,
            "token": self.token.compact(),
            "cid": e.cid,
            "kind": e.kind,
            "chainId": e.chain_id,
            "jwsToken": e.jws_token,
        }


@dataclass(frozen=True, slots=True)
class Eose:
    """End of stored events: ``token`` is the checkpoint to persist."""

    token: ProgressToken


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Nothing new for a while (live): transports send a keep-alive."""


FeedMessage = Status | Snapshot | Event | Eose | Heartbeat
