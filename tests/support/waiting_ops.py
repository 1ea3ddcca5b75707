"""Ops that wait in the pending buffer, and forged copies of them, for the
tests of the buffer's bounds (built from real signed workloads)."""

from __future__ import annotations

import json
from typing import Any

from relay.protocol import Ed25519Keypair, b64url_decode, b64url_encode, sign_jws
from relay.testing.workload import Actor, WorkloadBuilder

from .relay_api import PAST_MS


def chain_with_a_gap(seed: int) -> tuple[Actor, str, list[str]]:
    """The author; update 2's CID; tokens: identity, content genesis,
    update 1, update 2 (which waits while update 1 is held back)."""
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    author = b.identity()
    chain = b.content_create(author)
    b.content_update(chain)
    waiting_cid = b.content_update(chain)
    return author, waiting_cid, list(b.tokens)


def identity_update_with_a_gap(seed: int) -> tuple[str, list[str]]:
    """Update 2's CID; tokens: an identity's genesis, update 1 and update 2
    (which waits while update 1 is held back, and whose key update 1
    introduces, so its signature cannot be checked before)."""
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    author = b.identity()
    b.rotate(author)
    waiting_cid = b.rotate(author)
    return waiting_cid, list(b.tokens)


def other_identities(seed: int, count: int = 1) -> tuple[list[Actor], list[str]]:
    """``count`` identities that sign nothing of the workload: their
    genesis tokens, to make known before they sign copies."""
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    others = [b.identity() for _ in range(count)]
    return others, list(b.tokens)


def forged_signature(token: str, seed: int = 9) -> str:
    """``token`` (same header and payload, so same CID) with a signature by a
    key that is not the signer's: one forgery per ``seed``."""
    header, payload, _ = token.split(".")
    stranger = Ed25519Keypair.from_seed(bytes([seed]) * 32)
    return f"{header}.{payload}.{b64url_encode(stranger.sign(f'{header}.{payload}'.encode()))}"


def signed_by(token: str, other: Actor, kid: str | None = None) -> str:
    """``token``'s payload (so its CID) signed by ``other`` under ``kid``
    (default: ``other``'s own kid, so a signature that checks, by an identity
    that is not the signer)."""
    header_b64, payload_b64, _ = token.split(".")
    header = {**_segment(header_b64), "kid": kid or other.kid}
    return sign_jws(header, _segment(payload_b64), other.keypair)


def _segment(segment: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(b64url_decode(segment))
    return value
