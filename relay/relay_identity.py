"""The relay's own identity (WEB-RELAY.md "Relay Identity").

A relay with no identity given creates one on first start: an Ed25519 key,
an identity genesis op and a profile artifact signed by that key, persisted
in the store *before* they are ingested, so the DID survives restarts (and a
crash between the two steps is repaired by re-ingesting on the next start).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay.config import PROFILE_SCHEMA
from relay.protocol import (
    TYP_ARTIFACT,
    TYP_IDENTITY,
    Ed25519Keypair,
    did_from_genesis_cid,
    format_timestamp,
    sign_operation,
)
from stores.base import RelayIdentityRecord


def new_relay_identity(
    keypair: Ed25519Keypair, profile: Mapping[str, Any], now_ms: int
) -> RelayIdentityRecord:
    """Build (pure) a fresh relay identity: genesis op + profile artifact."""
    key = {"id": keypair.key_id, "type": "Multikey", "publicKeyMultibase": keypair.multikey}
    genesis = sign_operation(
        TYP_IDENTITY,
        {
            "version": 1,
            "type": "create",
            "authKeys": [key],
            "assertKeys": [key],
            "controllerKeys": [key],
            "createdAt": format_timestamp(now_ms),
        },
        keypair,
        keypair.key_id,
    )
    did = did_from_genesis_cid(genesis.cid)
    artifact = sign_operation(
        TYP_ARTIFACT,
        {
            "version": 1,
            "type": "artifact",
            "did": did,
            "content": {"$schema": PROFILE_SCHEMA, **dict(profile)},
            "createdAt": format_timestamp(now_ms),
        },
        keypair,
        f"{did}#{keypair.key_id}",
    )
    return RelayIdentityRecord(did, keypair.key_id, keypair.seed, genesis.token, artifact.token)
