"""Deterministic head selection (PROTOCOL.md "Chain Validity").

The head is the tip with the highest createdAt, the highest CID breaking a
tie. Because every op's createdAt is strictly greater than its parent's, the
maximum over *all* ops of a chain by (createdAt, CID) is always a tip, so the
head can be maintained in O(1) per accepted op: head = max(head, new op).
CIDs compare by code point, which for base32lower strings is bytewise.
"""

from __future__ import annotations


def head_key(created_at_ms: int, cid: str) -> tuple[int, str]:
    return (created_at_ms, cid)


def is_new_head(
    candidate_created_at_ms: int, candidate_cid: str, head_created_at_ms: int, head_cid: str
) -> bool:
    """True when the candidate displaces the current head."""
    return head_key(candidate_created_at_ms, candidate_cid) > head_key(head_created_at_ms, head_cid)


def select_head(tips: list[tuple[int, str]]) -> tuple[int, str]:
    """Pick the head among (createdAt ms, CID) tips; used by replays (Spark)."""
    return max(tips)
