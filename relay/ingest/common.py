"""Shared pieces of per-kind ingestion: the submitted op, outcomes, the
protocol-error mapping and the idempotency check."""

from __future__ import annotations

from dataclasses import dataclass

from relay.protocol import (
    AuthorizationError,
    ChainError,
    CidMismatchError,
    CredentialError,
    DecodedJws,
    FutureTimestampError,
    KeyNotFoundError,
    MalformedError,
    ProtocolError,
    SignatureError,
    cid_of,
    split_kid,
)
from relay.protocol.records import quick_init
from relay.rules.outcomes import Rejected, RejectReason
from stores.base import waits_for_op

from .view import StateView


@quick_init
@dataclass(frozen=True, slots=True)
class Submitted:
    """A well-formed token on its way through the pipeline.

    ``cid`` is the header's claim; verification derives the real CID and
    rejects the op if they differ, so nothing is stored under a false CID.
    """

    decoded: DecodedJws
    cid: str
    kind: str
    token_hash: str

    @property
    def token(self) -> str:
        return self.decoded.token

    @property
    def payload(self) -> dict[str, object]:
        return self.decoded.payload


@quick_init
@dataclass(frozen=True, slots=True)
class Accepted:
    kind: str
    chain_id: str
    wakes: tuple[str, ...]  # dependency keys this op satisfies


@dataclass(frozen=True, slots=True)
class Duplicate:
    kind: str
    chain_id: str


Outcome = Accepted | Duplicate | Rejected


def depends_on_op(cid: str) -> str:
    return waits_for_op(cid)  # the store follows these links (``take_waiting``)


def depends_on_did(did: str) -> str:
    return f"did:{did}"


def missing(reason: RejectReason, detail: str, key: str) -> Rejected:
    return Rejected(reason, detail, waits_for=key)


def rejection_for(exc: ProtocolError) -> Rejected:
    """Map the protocol's error tree onto relay reasons (never by message)."""
    if isinstance(exc, KeyNotFoundError):
        if exc.did is None:
            return Rejected(RejectReason.MALFORMED, str(exc))
        return missing(RejectReason.MISSING_KEY, str(exc), depends_on_did(exc.did))
    if isinstance(exc, FutureTimestampError):
        return Rejected(RejectReason.FUTURE_TIMESTAMP, str(exc))
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return Rejected(reason, str(exc))
    return Rejected(RejectReason.MALFORMED, str(exc))


_REASONS: tuple[tuple[type[ProtocolError], RejectReason], ...] = (
    (CidMismatchError, RejectReason.CID_MISMATCH),
    (SignatureError, RejectReason.BAD_SIGNATURE),
    (AuthorizationError, RejectReason.UNAUTHORIZED),
    (CredentialError, RejectReason.UNAUTHORIZED),
    (ChainError, RejectReason.CHAIN_RULE),
    (MalformedError, RejectReason.MALFORMED),
)


def check_idempotency(sub: Submitted, view: StateView) -> Duplicate | Rejected | None:
    """Same CID and same token: duplicate. Same CID, other token: rejected,
    since Ed25519 is deterministic a different token means another signer
    (or a header that lies about its CID)."""
    stored = view.operation(sub.cid)
    if stored is None:
        return None
    if stored.jws_token == sub.token:
        return Duplicate(stored.kind, stored.chain_id)
    try:
        derived = cid_of(sub.payload)
    except ProtocolError as exc:
        return rejection_for(exc)
    if derived != sub.cid:
        return Rejected(RejectReason.CID_MISMATCH, f"header cid {sub.cid} != derived {derived}")
    return Rejected(RejectReason.CID_CONFLICT, f"a different token for {sub.cid} is already stored")


def deleted_identity(did: str, role: str) -> Rejected:
    return Rejected(RejectReason.DELETED_IDENTITY, f"{role} {did} is deleted")


def kid_did(sub: Submitted) -> str | None:
    """The DID part of the op's ``kid`` (``<did>#<key id>``), if it has one;
    not verified (prefetch hints and causal ordering use it)."""
    kid = sub.decoded.kid
    if not isinstance(kid, str) or "#" not in kid:
        return None
    try:
        return split_kid(kid)[0]
    except ProtocolError:
        return None
