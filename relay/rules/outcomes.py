"""Ingestion outcomes (WEB-RELAY.md "Ingestion Statuses").

Whether a rejection is a missing dependency is a property of its reason,
never of its message: ``RejectReason.is_dependency``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from relay.protocol.records import quick_init


class Status(enum.StrEnum):
    NEW = "new"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


class RejectReason(enum.Enum):
    MALFORMED = "malformed"
    UNKNOWN_TYPE = "unknown-type"
    CID_MISMATCH = "cid-mismatch"
    CID_CONFLICT = "cid-conflict"
    BAD_SIGNATURE = "bad-signature"
    CHAIN_RULE = "chain-rule"
    FUTURE_TIMESTAMP = "future-timestamp"
    UNAUTHORIZED = "unauthorized"
    DELETED_IDENTITY = "deleted-identity"
    SELF_COUNTERSIGN = "self-countersign"
    WRONG_CHAIN = "wrong-chain"
    BUFFER_FULL = "buffer-full"
    MISSING_PREVIOUS = "missing-previous"
    MISSING_IDENTITY = "missing-identity"
    MISSING_KEY = "missing-key"
    MISSING_TARGET = "missing-target"
    # operator decisions (relay.ingest.policy): transient, the same op may pass later
    BANNED = "banned"
    POLICY_DENIED = "policy-denied"
    POLICY_ERROR = "policy-error"

    @property
    def is_dependency(self) -> bool:
        """A dependency failure may succeed once the missing state arrives."""
        return self in _DEPENDENCY_REASONS

    @property
    def is_permanent(self) -> bool:
        """Recorded once and never retried. Time-dependent and capacity
        rejections are not recorded: the same token may pass later."""
        return not self.is_dependency and self not in _TRANSIENT_REASONS


_DEPENDENCY_REASONS = frozenset(
    {
        RejectReason.MISSING_PREVIOUS,
        RejectReason.MISSING_IDENTITY,
        RejectReason.MISSING_KEY,
        RejectReason.MISSING_TARGET,
    }
)
_TRANSIENT_REASONS = frozenset(
    {
        RejectReason.FUTURE_TIMESTAMP,
        RejectReason.BUFFER_FULL,
        # a ban is lifted and a policy changes; and a peer serving such an op
        # is not lying (sync-in backs off only peers whose ops do not verify)
        RejectReason.BANNED,
        RejectReason.POLICY_DENIED,
        RejectReason.POLICY_ERROR,
    }
)


def recorded_text(reason: RejectReason, message: str) -> str:
    """How a permanent rejection is stored: its reason, a tab, its message."""
    return f"{reason.value}\t{message}"


def from_recorded_text(text: str) -> tuple[RejectReason, str]:
    """The reason and message of a stored rejection; rows stored before the
    reason was kept beside the message read as ``chain-rule``."""
    code, tab, message = text.partition("\t")
    if tab and code in _BY_VALUE:
        return _BY_VALUE[code], message
    return RejectReason.CHAIN_RULE, text


_BY_VALUE = {reason.value: reason for reason in RejectReason}


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: RejectReason
    detail: str
    waits_for: str | None = None  # dependency key, for dependency failures

    @property
    def message(self) -> str:
        if self.reason.is_dependency:
            return f"missing dependency: {self.detail}"
        return self.detail


@quick_init
@dataclass(frozen=True, slots=True)
class IngestionResult:
    """The answer for one submitted token; ``results[i]`` answers ``operations[i]``."""

    cid: str
    status: Status
    kind: str | None = None
    chain_id: str | None = None
    error: str | None = None
    reason: RejectReason | None = None
    waits_for: str | None = None  # a dependency rejection: the key it waits for (not on the wire)


@quick_init
@dataclass(frozen=True, slots=True)
class SequencedOp:
    """An op the relay just committed, as listeners (gossip, feed, indexes)
    see it: ``seq`` is its position in the global log."""

    cid: str
    jws_token: str
    kind: str
    chain_id: str
    seq: int
    created_at_ms: int
    author_did: str
