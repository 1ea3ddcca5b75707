"""PROTOCOL.md "Chain Validity", as a pure rule: the tips of a chain are its
nondominated ops, the head is the tip with the highest createdAt and then
the highest CID, and a branch runs from genesis along parent links."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from relay.rules.forks import HeadReason, branch_to, head_reason, tips_of


@dataclass(frozen=True)
class Op:
    cid: str
    parent_cid: str | None
    created_at_ms: int


G = Op("g", None, 1)
A1 = Op("a1", "g", 2)
A2 = Op("a2", "a1", 5)
B1 = Op("b1", "g", 3)
C1 = Op("c1", "g", 5)  # ties a2 on createdAt; "c1" > "a2"


def test_an_unforked_chain_has_one_tip() -> None:
    tips = tips_of([G, A1, A2])
    assert tips == [A2]
    assert head_reason(tips) is HeadReason.ONLY_TIP


def test_tips_come_in_head_key_order_with_the_head_last() -> None:
    tips = tips_of([A2, B1, G, A1])
    assert tips == [B1, A2]
    assert head_reason(tips) is HeadReason.LATEST_CREATED_AT


def test_a_created_at_tie_is_broken_by_the_highest_cid() -> None:
    tips = tips_of([G, A1, A2, B1, C1])
    assert tips == [B1, A2, C1]
    assert head_reason(tips) is HeadReason.CID_TIE_BREAK


@pytest.mark.parametrize(
    ("cid", "path"),
    [("a2", ["g", "a1", "a2"]), ("b1", ["g", "b1"]), ("g", ["g"]), ("a1", ["g", "a1"])],
)
def test_a_branch_runs_from_genesis_to_the_op(cid: str, path: list[str]) -> None:
    branch = branch_to([G, A1, A2, B1, C1], cid)
    assert branch is not None and [op.cid for op in branch] == path


def test_no_branch_for_an_op_outside_the_chain() -> None:
    assert branch_to([G, A1], "zz") is None
