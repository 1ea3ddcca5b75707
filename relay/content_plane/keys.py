"""The current-state key resolver (WEB-RELAY.md "Key Resolution").

Role: resolve a ``kid`` DID URL for *live* authentication (auth tokens and
presented credentials) against identity head states handed in by the caller.

Invariants: only keys in the identity's current state resolve, in any role;
a rotated-out key, an unknown identity, a bare (non-DID-URL) kid and a deleted
identity all raise ``KeyNotFoundError``. The historical resolver (every key
ever seen) is for chain re-verification and lives with ingestion; it must
never be used here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from relay.protocol import (
    IdentityState,
    KeyNotFoundError,
    KeyResolver,
    ProtocolError,
    decode_multikey,
    split_kid,
)

__all__ = ["current_state_resolver"]


def current_state_resolver(states: Mapping[str, IdentityState]) -> KeyResolver:
    """A resolver over the given head states (keyed by DID); nothing else resolves."""

    def resolve(kid: str) -> Sequence[bytes]:
        try:
            did, key_id = split_kid(kid)
        except ProtocolError as exc:
            raise KeyNotFoundError(f"kid {kid!r} is not a DID URL") from exc
        state = states.get(did) if did is not None else None
        if state is None:
            raise KeyNotFoundError(f"no current state for the identity of {kid}", did)
        if state.is_deleted:
            raise KeyNotFoundError(f"identity {did} is deleted", did)
        keys = {k.public_key_multibase for k in state.all_keys() if k.id == key_id}
        if not keys:
            raise KeyNotFoundError(f"{kid} is not a current key of {did}", did)
        return [decode_multikey(multikey) for multikey in sorted(keys)]

    return resolve
