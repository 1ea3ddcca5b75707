"""Progress tokens ``{streamId, epoch, position, messageCid}`` and their
compact form ``<epoch>.<seq>`` (what SSE ``id:`` and ``Last-Event-ID``
carry). Tokens compare only within one (streamId, epoch)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from relay.feed.errors import FeedRequestError

_COMPACT = re.compile(r"^([0-9a-z]{1,64})\.(0|[1-9][0-9]{0,17})$")
_SEQ = re.compile(r"^(0|[1-9][0-9]{0,17})$")


@dataclass(frozen=True, slots=True)
class ProgressToken:
    epoch: str
    seq: int
    cid: str | None = None

    def compact(self) -> str:
        return f"{self.epoch}.{self.seq}"

    def to_json(self, stream_id: str) -> dict[str, Any]:
        return {
            "streamId": stream_id,
            "epoch": self.epoch,
            "position": str(self.seq),
            "messageCid": self.cid,
        }


@dataclass(frozen=True, slots=True)
class Since:
    """Where a tail starts: a bare seq, or a token of some epoch."""

    seq: int
    epoch: str | None = None


def parse_since(text: str) -> Since:
    """``123`` or ``<epoch>.123``; anything else is a 400."""
    value = text.strip()
    if _SEQ.match(value):
        return Since(int(value))
    match = _COMPACT.match(value)
    if match is None:
        raise FeedRequestError(f"since must be a seq or a token <epoch>.<seq>, got {text[:80]!r}")
    return Since(int(match.group(2)), match.group(1))
