"""The DID document of a ``did:dfos`` identity, and its resolution result
(DID-METHOD.md section 4 "DID Document", 5.2 "Read (Resolve)"; W3C DID Core
and DID Resolution for the envelope).

Role: a pure mapping from a verified identity state (the head's) and a few
facts about its chain to JSON. Every key of the state becomes one
``verificationMethod`` (``did#keyId``, type ``Multikey``); ``authKeys`` map to
``authentication``, ``assertKeys`` to ``assertionMethod``, ``controllerKeys``
to ``capabilityInvocation``; the controller is the DID itself; no services.
A deleted (deactivated) identity has no verification methods.

The resolution metadata of DID-METHOD.md 5.2.2 is split as W3C DID
Resolution does: ``contentType`` in ``didResolutionMetadata``; ``created``,
``updated`` (DID Core datetimes: UTC, whole seconds), ``deactivated`` and
``operationCount`` in ``didDocumentMetadata``, with ``versionId`` (the head
CID) beside them. Not checked here: the state and counts come from verified
chain data.
"""

from __future__ import annotations

from typing import Any

from .state import IdentityState
from .timestamps import format_timestamp

__all__ = [
    "DID_CONTEXT",
    "DID_DOCUMENT_MEDIA_TYPE",
    "DID_RESOLUTION_CONTEXT",
    "did_document",
    "did_resolution_result",
]

DID_CONTEXT = ("https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1")
DID_RESOLUTION_CONTEXT = "https://w3id.org/did-resolution/v1"
DID_DOCUMENT_MEDIA_TYPE = "application/did+ld+json"


def did_document(state: IdentityState) -> dict[str, Any]:
    did = state.did
    methods: dict[str, dict[str, str]] = {}
    roles: dict[str, list[str]] = {
        "authentication": [],
        "assertionMethod": [],
        "capabilityInvocation": [],
    }
    if not state.is_deleted:
        for role, keys in (
            ("authentication", state.auth_keys),
            ("assertionMethod", state.assert_keys),
            ("capabilityInvocation", state.controller_keys),
        ):
            for key in keys:
                url = f"{did}#{key.id}"
                # a key held in several roles is one verification method
                methods.setdefault(
                    url,
                    {
                        "id": url,
                        "type": "Multikey",
                        "controller": did,
                        "publicKeyMultibase": key.public_key_multibase,
                    },
                )
                roles[role].append(url)
    return {
        "@context": list(DID_CONTEXT),
        "id": did,
        "controller": did,
        "verificationMethod": list(methods.values()),
        **roles,
    }


def did_datetime(ms: int) -> str:
    """DID Core datetime: ``2026-03-07T00:00:00Z`` (UTC, no sub-second part)."""
    return format_timestamp(ms)[:19] + "Z"


def did_resolution_result(
    state: IdentityState,
    *,
    created_ms: int,
    updated_ms: int,
    operation_count: int,
    version_id: str,
) -> dict[str, Any]:
    return {
        "@context": DID_RESOLUTION_CONTEXT,
        "didDocument": did_document(state),
        "didResolutionMetadata": {"contentType": DID_DOCUMENT_MEDIA_TYPE},
        "didDocumentMetadata": {
            "created": did_datetime(created_ms),
            "updated": did_datetime(updated_ms),
            "deactivated": state.is_deleted,
            "operationCount": operation_count,
            "versionId": version_id,
        },
    }
