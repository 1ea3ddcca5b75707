"""Protocol error tree.

Role: the single family of exceptions raised by ``relay.protocol``. Every
verifier raises one of these and nothing else for bad input, so callers can
catch ``ProtocolError`` once per operation and map the subclass to a result.

    ProtocolError
    ├── MalformedError       decode / parse / schema / field-limit problems
    ├── CidMismatchError     header ``cid`` missing or != CID derived from payload
    ├── SignatureError       Ed25519 signature does not verify
    ├── KeyNotFoundError     ``kid`` cannot be resolved (a missing dependency)
    ├── ChainError           chain rules: linkage, ordering, terminal state, signer role
    │   └── FutureTimestampError  createdAt beyond the future guard (24h; beacons 5min)
    ├── AuthorizationError   missing/invalid DFOSContentWrite delegation
    └── CredentialError      auth token / VC-JWT invalid

Invariant: messages are short, specific and human readable; they are sent to
clients verbatim as rejection reasons. Whether a failure is retryable is a
property of the class (only ``KeyNotFoundError`` signals a missing dependency),
never of the message text.
"""

from __future__ import annotations

__all__ = [
    "AuthorizationError",
    "ChainError",
    "CidMismatchError",
    "CredentialError",
    "FutureTimestampError",
    "KeyNotFoundError",
    "MalformedError",
    "ProtocolError",
    "SignatureError",
]


class ProtocolError(Exception):
    """Base class of every protocol verification failure."""


class MalformedError(ProtocolError):
    """The input could not be decoded or does not match the payload schema."""


class CidMismatchError(ProtocolError):
    """The JWS header ``cid`` is missing or differs from the derived CID."""


class SignatureError(ProtocolError):
    """The Ed25519 signature does not verify against any candidate key."""


class KeyNotFoundError(ProtocolError):
    """The ``kid`` could not be resolved to a public key.

    The relay treats this as a missing dependency (the identity chain may
    arrive later), so ``did`` names the identity that was looked up, if known.
    """

    def __init__(self, message: str, did: str | None = None) -> None:
        super().__init__(message)
        self.did = did


class ChainError(ProtocolError):
    """A chain rule is violated (linkage, ordering, terminal state, signer)."""


class FutureTimestampError(ChainError):
    """``createdAt`` is beyond the future guard of the verifier's clock.

    Time-dependent: the same operation may pass later, so relays must not
    record it as a permanent rejection.
    """


class AuthorizationError(ProtocolError):
    """A non-creator content operation lacks a valid DFOSContentWrite grant."""


class CredentialError(ProtocolError):
    """An auth token or VC-JWT credential is invalid."""
