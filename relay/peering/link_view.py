"""A link of the replication ledger as operators read it: the stored record
plus its lag (``GET /peers``, the gauges, ``dfos-relay peers``). Pure.

Lag, in-links: ``lag_ops`` is the peer's head seq (as last seen) minus the
seq of the applied token, when both are known (a polled v0.7.1 peer has no
head seq: None). Out-links: our head seq minus the push watermark.
``lag_seconds`` is 0 while caught up, else the time since the link was last
caught up (None: never).
"""

from __future__ import annotations

from dataclasses import dataclass

from relay.protocol.untrusted import ascii_decimal
from stores.base import LinkRecord


@dataclass(frozen=True, slots=True)
class LinkView:
    record: LinkRecord
    lag_ops: int | None
    lag_seconds: float | None


def token_seq(token: str | None) -> int | None:
    """The seq in a feed token ``<epoch>.<seq>`` or a bare seq (None otherwise)."""
    if token is None:
        return None
    return ascii_decimal(token.rpartition(".")[2])


def link_view(record: LinkRecord, now_ms: int, our_head: int) -> LinkView:
    applied = token_seq(record.applied_token)
    if record.direction == "out":
        lag_ops: int | None = None if applied is None else max(0, our_head - applied)
    elif record.remote_head is not None and applied is not None:
        lag_ops = max(0, record.remote_head - applied)
    else:
        lag_ops = None
    if lag_ops == 0 and not record.pending_tokens:
        lag_seconds: float | None = 0.0
    elif record.caught_up_ms is not None:
        lag_seconds = max(0.0, (now_ms - record.caught_up_ms) / 1000)
    else:
        lag_seconds = None
    return LinkView(record, lag_ops, lag_seconds)
