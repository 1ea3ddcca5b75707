"""Payload builders for clients, tests and benchmarks.

Role: construct operation payload dicts with the field order the reference
implementation uses, so that signing them reproduces reference tokens byte
for byte (JWS signs the JSON text, whose key order is the dict order).

Invariant: builders do no validation; verification is the parsers' job.
Keys may be given as ``MultikeyPublicKey`` or as a key pair (whose
conventional ``key_...`` id and multikey are used).
"""

from __future__ import annotations

from collections.abc import Iterable

from .keys import Ed25519Keypair
from .payloads import MultikeyPublicKey

__all__ = [
    "artifact_payload",
    "beacon_payload",
    "content_create_payload",
    "content_delete_payload",
    "content_update_payload",
    "countersign_payload",
    "identity_create_payload",
    "identity_delete_payload",
    "identity_update_payload",
    "key_entry",
]

KeyLike = MultikeyPublicKey | Ed25519Keypair


def key_entry(key: KeyLike) -> dict[str, object]:
    """Wire form ``{id, type, publicKeyMultibase}`` of a key or key pair."""
    if isinstance(key, Ed25519Keypair):
        return {"id": key.key_id, "type": "Multikey", "publicKeyMultibase": key.multikey}
    return key.to_json()


def _entries(keys: Iterable[KeyLike]) -> list[dict[str, object]]:
    return [key_entry(k) for k in keys]


def identity_create_payload(
    auth_keys: Iterable[KeyLike],
    assert_keys: Iterable[KeyLike],
    controller_keys: Iterable[KeyLike],
    created_at: str,
) -> dict[str, object]:
    return {
        "version": 1,
        "type": "create",
        "authKeys": _entries(auth_keys),
        "assertKeys": _entries(assert_keys),
        "controllerKeys": _entries(controller_keys),
        "createdAt": created_at,
    }


def identity_update_payload(
    previous_cid: str,
    auth_keys: Iterable[KeyLike],
    assert_keys: Iterable[KeyLike],
    controller_keys: Iterable[KeyLike],
    created_at: str,
) -> dict[str, object]:
    return {
        "version": 1,
        "type": "update",
        "previousOperationCID": previous_cid,
        "authKeys": _entries(auth_keys),
        "assertKeys": _entries(assert_keys),
        "controllerKeys": _entries(controller_keys),
        "createdAt": created_at,
    }


def identity_delete_payload(previous_cid: str, created_at: str) -> dict[str, object]:
    return {
        "version": 1,
        "type": "delete",
        "previousOperationCID": previous_cid,
        "createdAt": created_at,
    }


def content_create_payload(
    did: str,
    document_cid: str,
    created_at: str,
    base_document_cid: str | None = None,
    note: str | None = None,
) -> dict[str, object]:
    return {
        "version": 1,
        "type": "create",
        "did": did,
        "documentCID": document_cid,
        "baseDocumentCID": base_document_cid,
        "createdAt": created_at,
        "note": note,
    }


def content_update_payload(
    did: str,
    previous_cid: str,
    document_cid: str | None,
    created_at: str,
    base_document_cid: str | None = None,
    note: str | None = None,
    authorization: str | None = None,
) -> dict[str, object]:
    payload: dict[str, object] = {
        "version": 1,
        "type": "update",
        "did": did,
        "previousOperationCID": previous_cid,
        "documentCID": document_cid,
        "baseDocumentCID": base_document_cid,
        "createdAt": created_at,
        "note": note,
    }
    if authorization is not None:
        payload["authorization"] = authorization
    return payload


def content_delete_payload(
    did: str,
    previous_cid: str,
    created_at: str,
    note: str | None = None,
    authorization: str | None = None,
) -> dict[str, object]:
    payload: dict[str, object] = {
        "version": 1,
        "type": "delete",
        "did": did,
        "previousOperationCID": previous_cid,
        "createdAt": created_at,
        "note": note,
    }
    if authorization is not None:
        payload["authorization"] = authorization
    return payload


def beacon_payload(did: str, merkle_root: str, created_at: str) -> dict[str, object]:
    return {
        "version": 1,
        "type": "beacon",
        "did": did,
        "merkleRoot": merkle_root,
        "createdAt": created_at,
    }


def artifact_payload(did: str, content: dict[str, object], created_at: str) -> dict[str, object]:
    return {
        "version": 1,
        "type": "artifact",
        "did": did,
        "content": content,
        "createdAt": created_at,
    }


def countersign_payload(did: str, target_cid: str, created_at: str) -> dict[str, object]:
    return {
        "version": 1,
        "type": "countersign",
        "did": did,
        "targetCID": target_cid,
        "createdAt": created_at,
    }
