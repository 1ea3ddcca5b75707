"""SHA-256 binary Merkle trees over content ids (PROTOCOL.md "Merkle Trees").

Role: compute the beacon ``merkleRoot`` over a set of content ids, build
inclusion proofs and check them.

Invariants: ids are sorted by UTF-8 bytes; a leaf is ``SHA-256(utf8(id))``;
a parent is ``SHA-256(left || right)``; an odd node at the end of a level is
promoted unchanged; the root is lowercase hex; an empty set has no root.
Duplicates are not removed: callers pass a set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from .errors import MalformedError

__all__ = ["ProofStep", "merkle_proof", "merkle_root", "verify_merkle_proof"]


@dataclass(frozen=True, slots=True)
class ProofStep:
    """A sibling hash (hex) and the side it sits on relative to the running hash."""

    hash: str
    position: Literal["left", "right"]

    def to_json(self) -> dict[str, str]:
        return {"hash": self.hash, "position": self.position}


def _leaves(content_ids: Iterable[str]) -> list[bytes]:
    encoded = sorted(cid.encode("utf-8") for cid in content_ids)
    return [hashlib.sha256(b).digest() for b in encoded]


def _next_level(level: list[bytes]) -> list[bytes]:
    paired = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
    if len(level) % 2:
        paired.append(level[-1])
    return paired


def merkle_root(content_ids: Iterable[str]) -> str | None:
    """Hex root over ``content_ids``, or ``None`` for an empty set."""
    level = _leaves(content_ids)
    if not level:
        return None
    while len(level) > 1:
        level = _next_level(level)
    return level[0].hex()


def merkle_proof(content_ids: Iterable[str], content_id: str) -> tuple[ProofStep, ...]:
    """Inclusion proof of ``content_id``; raises ``MalformedError`` if it is not in the set."""
    ids = sorted(content_ids, key=lambda s: s.encode("utf-8"))
    try:
        index = ids.index(content_id)
    except ValueError as exc:
        raise MalformedError("content id is not in the set") from exc
    level = _leaves(ids)
    steps: list[ProofStep] = []
    while len(level) > 1:
        sibling = index ^ 1
        if sibling < len(level):  # otherwise this node is promoted without a step
            position: Literal["left", "right"] = "right" if index % 2 == 0 else "left"
            steps.append(ProofStep(level[sibling].hex(), position))
        level = _next_level(level)
        index //= 2
    return tuple(steps)


def verify_merkle_proof(content_id: str, proof: Sequence[ProofStep], root: str) -> bool:
    """True iff walking ``proof`` from the leaf of ``content_id`` reaches ``root``."""
    try:
        current = hashlib.sha256(content_id.encode("utf-8")).digest()
        for step in proof:
            sibling = bytes.fromhex(step.hash)
            if len(sibling) != 32:
                return False
            if step.position == "right":
                current = hashlib.sha256(current + sibling).digest()
            elif step.position == "left":
                current = hashlib.sha256(sibling + current).digest()
            else:
                return False
        return current.hex() == root
    except (AttributeError, TypeError, ValueError):
        return False
