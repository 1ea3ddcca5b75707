"""Progress tokens ``{streamId, epoch, position, messageCid}`` and their
compact form ``<epoch>.<seq>`` (what SSE ``id:`` and ``Last-Event-ID``
carry). Tokens compare only within one (streamId, epoch)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from relay.feed.errors import FeedRequestError

_EPOCH = re.compile(r"[0-9a-z]{1,64}")
# a seq as the relay writes one: ASCII digits, no leading zero but in "0"
# (a consumer passes back positions it was given, never another numeral)
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


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


def parse_decimal(text: str) -> int | None:
    """The value of ``text`` (surrounding blanks aside) when it is a canonical
    decimal, the one rule of every seq-like feed parameter (``since``, a
    token's position, ``Last-Event-ID``, ``until_seq``, ``limit``); else None."""
    value = text.strip()
    return int(value) if _DECIMAL.fullmatch(value) else None


def parse_since(text: str) -> Since:
    """``123`` or ``<epoch>.123``; anything else is a 400."""
    seq = parse_decimal(text)
    if seq is not None:
        return Since(seq)
    epoch, dot, position = text.strip().rpartition(".")
    seq = parse_decimal(position) if dot and _EPOCH.fullmatch(epoch) else None
    if seq is None or position != position.strip():
        raise FeedRequestError(f"since must be a seq or a token <epoch>.<seq>, got {text[:80]!r}")
    return Since(seq, epoch)
