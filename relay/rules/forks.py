"""Fork structure of one chain: its tips, which tip is the head and why, and
the branch from genesis to any op (PROTOCOL.md "Chain Validity";
WEB-RELAY.md "Fork Acceptance").

A *tip* is an op no other op of the chain names as its parent (a
nondominated op). The head is the tip with the highest createdAt, the
highest CID breaking a tie (``heads.head_key``); since every op's createdAt
exceeds its parent's, that is also the maximum over all ops. Pure: the ops
come in as values (any object with ``cid``, ``parent_cid`` and
``created_at_ms``); nothing here reads a store or a clock.

Not checked: that the ops form one valid chain (verification did that when
they were accepted); ops whose parent is absent are treated as roots.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from .heads import head_key

HEAD_RULE = "highest createdAt, then highest CID (code-point order)"


class ChainOp(Protocol):
    @property
    def cid(self) -> str: ...
    @property
    def parent_cid(self) -> str | None: ...
    @property
    def created_at_ms(self) -> int: ...


_Op = TypeVar("_Op", bound=ChainOp)


class HeadReason(enum.Enum):
    """Why the head tip won."""

    ONLY_TIP = "only-tip"  # no fork: one tip
    LATEST_CREATED_AT = "latest-createdAt"  # strictly the highest createdAt
    CID_TIE_BREAK = "createdAt-tie-highest-cid"  # tied createdAt, highest CID


def tips_of(ops: Iterable[_Op]) -> list[_Op]:
    """The chain's tips in head-key order (ascending: the head is last)."""
    ops = list(ops)
    parents = {op.parent_cid for op in ops if op.parent_cid is not None}
    tips = [op for op in ops if op.cid not in parents]
    return sorted(tips, key=lambda op: head_key(op.created_at_ms, op.cid))


def head_reason(tips: Sequence[ChainOp]) -> HeadReason:
    """Why the last of ``tips`` (as ordered by ``tips_of``) is the head."""
    if len(tips) < 2:
        return HeadReason.ONLY_TIP
    if tips[-1].created_at_ms == tips[-2].created_at_ms:
        return HeadReason.CID_TIE_BREAK
    return HeadReason.LATEST_CREATED_AT


def branch_to(ops: Iterable[_Op], cid: str) -> list[_Op] | None:
    """The ops from genesis to ``cid`` along parent links, genesis first;
    None when ``cid`` is not an op of ``ops``."""
    by_cid = {op.cid: op for op in ops}
    path: list[_Op] = []
    current = by_cid.get(cid)
    if current is None:
        return None
    while current is not None:
        path.append(current)
        parent = current.parent_cid
        current = by_cid.get(parent) if parent is not None else None
        if len(path) > len(by_cid):  # a parent cycle cannot come from verified ops
            raise ValueError(f"parent links of {cid} form a cycle")
    path.reverse()
    return path
