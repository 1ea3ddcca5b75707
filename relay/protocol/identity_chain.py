"""Identity chain verification (PROTOCOL.md "Identity Chain Signer Validity",
"Verification / Identity Chain", DID-METHOD.md section 5).

Role: verify one identity operation at a time - a genesis from nothing, an
extension from a trusted parent state in O(1) - and a whole linear chain.

Invariants:
- genesis: ``type`` create, bare ``kid`` naming one of the op's own controller
  keys, DID = derived from the genesis CID;
- extension: ``previousOperationCID`` = parent CID, parent not deleted,
  ``kid`` = ``<this DID>#<key>`` naming a controller key of the *parent* state,
  ``createdAt`` strictly greater than the parent's;
- every op: ``typ`` did:dfos:identity-op, header ``cid`` matches, ``createdAt``
  at most 24h ahead of ``now_ms``, Ed25519 signature by the signer key;
- update replaces all three key sets; delete seals the chain but keeps keys;
- no key id twice in one role (create, update), and a genesis binds each key id
  to one public key across its roles (as the reference verifiers do: a
  ``did#keyId`` verification method must mean one key).
Fork handling and head selection are the caller's job: extensions are
verified against whatever parent state the caller supplies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .envelope import TYP_IDENTITY, check_cid, check_not_future, expect_typ, kid_did_url
from .errors import ChainError, MalformedError
from .ids import did_from_genesis_cid, split_kid
from .jws import DecodedJws, decode_jws, verify_jws
from .payloads import IdentityOperation, MultikeyPublicKey, parse_identity_operation
from .records import quick_init
from .state import IdentityState

__all__ = [
    "IdentityChainResult",
    "VerifiedIdentityOp",
    "verify_identity_chain",
    "verify_identity_extension",
    "verify_identity_genesis",
]


@quick_init
@dataclass(frozen=True, slots=True)
class VerifiedIdentityOp:
    """An identity operation that passed verification, with the state it produces."""

    cid: str
    did: str
    operation: IdentityOperation
    state: IdentityState
    signer_key_id: str


@dataclass(frozen=True, slots=True)
class IdentityChainResult:
    did: str
    state: IdentityState
    head_cid: str
    operations: tuple[VerifiedIdentityOp, ...]


def _check_key_ids(op: IdentityOperation, across_roles: bool) -> None:
    """No key id twice in a role; with ``across_roles``, one key per key id."""
    seen: dict[str, MultikeyPublicKey] = {}
    for keys in (op.auth_keys, op.assert_keys, op.controller_keys):
        if len({k.id for k in keys}) != len(keys):
            raise MalformedError("cannot repeat key ids in the same key set")
        for key in keys if across_roles else ():
            first = seen.setdefault(key.id, key)
            if first.public_key_multibase != key.public_key_multibase:
                raise MalformedError(f"key id {key.id!r} names two different keys")


def verify_identity_genesis(decoded: DecodedJws, now_ms: int) -> VerifiedIdentityOp:
    """Verify the ``create`` operation that starts an identity chain."""
    expect_typ(decoded, TYP_IDENTITY)
    op = parse_identity_operation(decoded.payload)
    if op.type != "create":
        raise ChainError("identity chain must start with a create operation")
    _check_key_ids(op, across_roles=True)
    kid = decoded.kid
    if kid is None:
        raise MalformedError("JWS header has no kid")
    kid_did, key_id = split_kid(kid)
    if kid_did is not None:
        raise MalformedError("identity genesis kid must be a bare key id")
    signer = next((k for k in op.controller_keys if k.id == key_id), None)
    if signer is None:
        raise ChainError("genesis signer is not one of its controller keys")
    cid, _ = check_cid(decoded)
    check_not_future(op.created_at_ms, now_ms)
    verify_jws(decoded, signer.public_key)
    did = did_from_genesis_cid(cid)
    state = IdentityState(did, False, op.auth_keys, op.assert_keys, op.controller_keys)
    return VerifiedIdentityOp(cid, did, op, state, key_id)


def verify_identity_extension(
    decoded: DecodedJws,
    did: str,
    parent_cid: str,
    parent_state: IdentityState,
    parent_created_at_ms: int,
    now_ms: int,
) -> VerifiedIdentityOp:
    """Verify an update/delete against the trusted state after ``parent_cid``."""
    expect_typ(decoded, TYP_IDENTITY)
    op = parse_identity_operation(decoded.payload)
    if op.type == "create":
        raise ChainError("create cannot extend an existing identity chain")
    if parent_state.is_deleted:
        raise ChainError("identity is deleted; no operations may follow a delete")
    if op.previous_cid != parent_cid:
        raise ChainError("previousOperationCID does not match the parent operation")
    _check_key_ids(op, across_roles=False)
    kid_did, key_id = kid_did_url(decoded)
    if kid_did != did:
        raise ChainError("kid DID does not match the identity DID")
    signer = parent_state.find_controller_key(key_id)
    if signer is None:
        raise ChainError("signer is not a controller key of the identity")
    cid, _ = check_cid(decoded)
    if op.created_at_ms <= parent_created_at_ms:
        raise ChainError("createdAt must be later than the previous operation")
    check_not_future(op.created_at_ms, now_ms)
    verify_jws(decoded, signer.public_key)
    if op.type == "delete":
        state = IdentityState(
            did,
            True,
            parent_state.auth_keys,
            parent_state.assert_keys,
            parent_state.controller_keys,
        )
    else:
        state = IdentityState(did, False, op.auth_keys, op.assert_keys, op.controller_keys)
    return VerifiedIdentityOp(cid, did, op, state, key_id)


def verify_identity_chain(tokens: Sequence[str], now_ms: int) -> IdentityChainResult:
    """Verify a linear identity chain given as JWS tokens from genesis to head."""
    if not tokens:
        raise MalformedError("identity chain is empty")
    head = verify_identity_genesis(decode_jws(tokens[0]), now_ms)
    verified = [head]
    for token in tokens[1:]:
        head = verify_identity_extension(
            decode_jws(token),
            head.did,
            head.cid,
            head.state,
            head.operation.created_at_ms,
            now_ms,
        )
        verified.append(head)
    return IdentityChainResult(head.did, head.state, head.cid, tuple(verified))
