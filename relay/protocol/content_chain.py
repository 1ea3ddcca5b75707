"""Content chain verification (PROTOCOL.md "Content Chain Signer Model",
"Content Chain Authorization", "Verification / Content Chain").

Role: verify one content operation at a time - a genesis, or an extension
from a trusted parent state in O(1) - and a whole linear chain. Keys come
from a caller-supplied ``KeyResolver``.

Invariants:
- every op: ``typ`` did:dfos:content-op, ``kid`` = ``<payload did>#<key>``,
  header ``cid`` matches, ``createdAt`` at most 24h ahead, signature valid;
- genesis: ``type`` create; its signer DID is the permanent chain creator;
- extension: ``previousOperationCID`` = parent CID, parent not deleted,
  ``createdAt`` strictly greater than the parent's; when the signer is not
  the creator (and authorization is enforced) ``authorization`` must hold a
  DFOSContentWrite VC-JWT issued by the creator to the signer, valid at the
  op's ``createdAt`` (not wall clock) and, if narrowed, to this content id;
- update sets or clears the document; delete seals the chain, clears it.
Not checked: which key role signed (application concern), whether the signer
or creator identity is deleted (the resolver / relay decide that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .credentials import DFOS_CONTENT_WRITE, verify_credential_at_ms
from .envelope import (
    TYP_CONTENT,
    KeyResolver,
    check_cid,
    check_not_future,
    expect_typ,
    signer_did,
    verify_with_resolver,
)
from .errors import AuthorizationError, ChainError, CredentialError, MalformedError
from .ids import content_id_from_genesis_cid
from .jws import DecodedJws, decode_jws
from .payloads import ContentOperation, parse_content_operation
from .records import quick_init
from .state import ContentState

__all__ = [
    "ContentChainResult",
    "VerifiedContentOp",
    "verify_content_chain",
    "verify_content_extension",
    "verify_content_genesis",
]


@quick_init
@dataclass(frozen=True, slots=True)
class VerifiedContentOp:
    """A content operation that passed verification, with the state it produces."""

    cid: str
    content_id: str
    operation: ContentOperation
    state: ContentState
    signer_did: str


@dataclass(frozen=True, slots=True)
class ContentChainResult:
    content_id: str
    state: ContentState
    operations: tuple[VerifiedContentOp, ...]


def verify_content_genesis(
    decoded: DecodedJws, resolve_key: KeyResolver, now_ms: int
) -> VerifiedContentOp:
    """Verify the ``create`` operation that starts a content chain."""
    expect_typ(decoded, TYP_CONTENT)
    op = parse_content_operation(decoded.payload)
    if op.type != "create":
        raise ChainError("content chain must start with a create operation")
    signer = signer_did(decoded, op.did)
    cid, _ = check_cid(decoded)
    check_not_future(op.created_at_ms, now_ms)
    verify_with_resolver(decoded, resolve_key, signer)
    content_id = content_id_from_genesis_cid(cid)
    state = ContentState(content_id, cid, cid, False, op.document_cid, 1, signer)
    return VerifiedContentOp(cid, content_id, op, state, signer)


def _check_authorization(
    op: ContentOperation, signer: str, parent: ContentState, resolve_key: KeyResolver
) -> None:
    if op.authorization is None:
        raise AuthorizationError("signer is not the chain creator and has no authorization")
    try:
        credential = verify_credential_at_ms(
            op.authorization,
            resolve_key,
            op.created_at_ms,
            expected_type=DFOS_CONTENT_WRITE,
            expected_subject=signer,
        )
    except CredentialError as exc:
        raise AuthorizationError(f"authorization invalid: {exc}") from exc
    if credential.iss != parent.creator_did:
        raise AuthorizationError("authorization is not issued by the chain creator")
    if credential.content_id is not None and credential.content_id != parent.content_id:
        raise AuthorizationError("authorization is narrowed to a different content chain")


def verify_content_extension(
    decoded: DecodedJws,
    parent_cid: str,
    parent_state: ContentState,
    parent_created_at_ms: int,
    resolve_key: KeyResolver,
    now_ms: int,
    enforce_authorization: bool = True,
) -> VerifiedContentOp:
    """Verify an update/delete against the trusted state after ``parent_cid``."""
    expect_typ(decoded, TYP_CONTENT)
    op = parse_content_operation(decoded.payload)
    if op.type == "create":
        raise ChainError("create cannot extend an existing content chain")
    if parent_state.is_deleted:
        raise ChainError("content is deleted; no operations may follow a delete")
    if op.previous_cid != parent_cid:
        raise ChainError("previousOperationCID does not match the parent operation")
    signer = signer_did(decoded, op.did)
    cid, _ = check_cid(decoded)
    if op.created_at_ms <= parent_created_at_ms:
        raise ChainError("createdAt must be later than the previous operation")
    check_not_future(op.created_at_ms, now_ms)
    if enforce_authorization and signer != parent_state.creator_did:
        _check_authorization(op, signer, parent_state, resolve_key)
    verify_with_resolver(decoded, resolve_key, signer)
    deleted = op.type == "delete"
    state = ContentState(
        parent_state.content_id,
        parent_state.genesis_cid,
        cid,
        deleted,
        None if deleted else op.document_cid,
        parent_state.length + 1,
        parent_state.creator_did,
    )
    return VerifiedContentOp(cid, parent_state.content_id, op, state, signer)


def verify_content_chain(
    tokens: Sequence[str],
    resolve_key: KeyResolver,
    now_ms: int,
    enforce_authorization: bool = True,
) -> ContentChainResult:
    """Verify a linear content chain given as JWS tokens from genesis to head."""
    if not tokens:
        raise MalformedError("content chain is empty")
    head = verify_content_genesis(decode_jws(tokens[0]), resolve_key, now_ms)
    verified = [head]
    for token in tokens[1:]:
        head = verify_content_extension(
            decode_jws(token),
            head.cid,
            head.state,
            head.operation.created_at_ms,
            resolve_key,
            now_ms,
            enforce_authorization,
        )
        verified.append(head)
    return ContentChainResult(head.content_id, head.state, tuple(verified))
