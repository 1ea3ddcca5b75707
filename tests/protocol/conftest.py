"""Fixtures for the protocol suite: upstream vectors, reference keys, resolvers.

Vectors are read from ``shared/reference/vectors`` beside the repository.
``NOW_MS`` is a verifier clock one day after every vector timestamp and
inside the validity window of every vector credential.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from relay.protocol import (
    Ed25519Keypair,
    IdentityState,
    KeyNotFoundError,
    KeyResolver,
    parse_timestamp,
    reference_keypair,
    verify_identity_chain,
)

VECTORS_DIR = Path(__file__).resolve().parents[3] / "shared" / "reference" / "vectors"
SPECS_DIR = VECTORS_DIR.parent / "specs"

NOW_MS = parse_timestamp("2026-03-08T00:00:00.000Z")
NOW_S = NOW_MS // 1000
CREATOR_DID = "did:dfos:e3vvtck42d4eacdnzvtrn6"
DELEGATE_DID = "did:dfos:nzkf838efr424433rn2rzk"


@cache
def vector(name: str) -> dict[str, Any]:
    """Load ``<name>.json`` from the upstream vectors directory."""
    with (VECTORS_DIR / f"{name}.json").open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@pytest.fixture
def load_vector() -> Callable[[str], dict[str, Any]]:
    return vector


@cache
def ref_key(n: int) -> Ed25519Keypair:
    return reference_keypair(n)


def keys_by_id() -> dict[str, Ed25519Keypair]:
    """Reference keys 1-3 by their conventional key id."""
    return {ref_key(n).key_id: ref_key(n) for n in (1, 2, 3)}


def static_resolver(keys: Mapping[str, bytes | Sequence[bytes]]) -> KeyResolver:
    """Resolver over a fixed ``kid -> key(s)`` table; unknown kids are missing."""

    def resolve(kid: str) -> Sequence[bytes]:
        found = keys.get(kid)
        if found is None:
            raise KeyNotFoundError(f"unknown key {kid}")
        return [found] if isinstance(found, bytes) else list(found)

    return resolve


def historical_resolver(states: Iterable[IdentityState]) -> KeyResolver:
    """Every key that ever appeared in the given identity states (relay's historical resolver)."""
    table: dict[str, list[bytes]] = {}
    for state in states:
        for key in state.all_keys():
            known = table.setdefault(f"{state.did}#{key.id}", [])
            if key.public_key not in known:
                known.append(key.public_key)
    return static_resolver(table)


@cache
def reference_identity_states() -> tuple[IdentityState, ...]:
    """States of the reference identity along the identity-rotation vector."""
    result = verify_identity_chain(vector("identity-rotation")["chain"], NOW_MS)
    return tuple(op.state for op in result.operations)


def reference_resolver(*, with_delegate: bool = True) -> KeyResolver:
    """Historical keys of the reference identity plus (optionally) the delegate's key 3.

    The delegate's identity chain is not part of the vectors, so its key is
    known only from the vector's public key and the key id in its ``kid``.
    """
    table: dict[str, list[bytes]] = {}
    for state in reference_identity_states():
        for key in state.all_keys():
            table.setdefault(f"{state.did}#{key.id}", []).append(key.public_key)
    if with_delegate:
        table[f"{DELEGATE_DID}#{ref_key(3).key_id}"] = [ref_key(3).public_key]
    return static_resolver(table)
