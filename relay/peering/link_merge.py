"""An out-link as every process on a store vouches for it together. Pure.

Every process on a store (the workers of ``serve --workers N``, hosts
sharing one Postgres) gossips the ops it ingested itself, and writes its own
share of each out-link (``stores.base.OutMark``): its watermark covers its
own pushes, and ops other processes ingested do not hold it back (they are
not its to deliver). The link is delivered up to a seq only when every share
says so, so the merged link is:

- ``applied_token``   the lowest share's watermark (None if one is unknown);
- ``received_token``  the highest; ``pending_tokens`` all shares', by seq;
- ``state``           ``paused`` when the link is (the operator's state, as
                      the process or the shared row knows it), else the worst
                      share's: ``repairing`` > ``initial`` > ``live``;
- ``failures``        the most of any share (each counts its own consecutive
                      failures), with the ``last_error`` of the latest failure;
- ``last_success_ms``, ``last_failure_ms``, ``updated_ms``: the latest;
- ``caught_up_ms``    the earliest (None if a share never caught up): the
                      link is caught up when its slowest share is.

A share whose writer is gone still counts until a live process clears it
(``is_gone``: not written for ``MARK_STALE_MS``, or left behind by a clean
stop, ``updated_ms`` 0); the process that clears it takes its watermark as
a floor of its own (``relay.peering.watermark.OutLinks.adopt``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from relay.protocol.untrusted import ascii_decimal
from stores.base import LINK_PENDING_MAX, LinkRecord, LinkState

MARK_TOUCH_MS = 10_000  # a live process writes its shares at least this often
MARK_STALE_MS = 60_000  # a share not written for this long: its writer is gone
_WORSE: dict[LinkState, int] = {"live": 0, "degraded_poll": 1, "initial": 2, "repairing": 3}


def is_gone(share: LinkRecord, now_ms: int, stale_ms: int = MARK_STALE_MS) -> bool:
    return share.updated_ms == 0 or now_ms - share.updated_ms > stale_ms


def _seq(token: str | None) -> int | None:
    return None if token is None else ascii_decimal(token)


def merge_out(link: LinkRecord, shares: Sequence[LinkRecord]) -> LinkRecord:
    """``link`` (its key, pause and diagnostics) with what ``shares`` vouch
    for together; ``link`` itself when there are none (one process, or none
    left: as it was last written)."""
    if not shares:
        return link
    applied = [_seq(s.applied_token) for s in shares]
    received = [_seq(s.received_token) for s in shares]
    pending = sorted({t for s in shares for t in s.pending_tokens}, key=lambda t: _seq(t) or 0)
    state: LinkState = "paused"
    if link.state != "paused":
        states = [s.state for s in shares if s.state != "paused"] or ["initial"]
        state = max(states, key=lambda s: _WORSE[s])
    failed = max(shares, key=lambda s: s.last_failure_ms or 0)
    caught = [s.caught_up_ms for s in shares]
    return replace(
        link,
        state=state,
        applied_token=None if None in applied else str(min(a for a in applied if a is not None)),
        received_token=_latest([r for r in received if r is not None]),
        pending_tokens=tuple(pending[:LINK_PENDING_MAX]),
        failures=max(s.failures for s in shares),
        last_error=failed.last_error,
        last_success_ms=_latest_ms([s.last_success_ms for s in shares]),
        last_failure_ms=_latest_ms([s.last_failure_ms for s in shares]),
        caught_up_ms=None if None in caught else min(c for c in caught if c is not None),
        updated_ms=max(s.updated_ms for s in shares),
    )


def _latest(seqs: list[int]) -> str | None:
    return str(max(seqs)) if seqs else None


def _latest_ms(times: list[int | None]) -> int | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None
