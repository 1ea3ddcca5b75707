"""Rendezvous fan-out rules: deterministic ranking, k within bounds, and
shares that partition the peers after the coordinators."""

from __future__ import annotations

import math

import pytest

from relay.peering.rendezvous import (
    coordinator_count,
    coordinators,
    rank,
    score,
    share_of,
    shares,
)

DIDS = [f"did:dfos:peer{i:02d}" for i in range(64)]


def test_score_is_hmac_sha256_keyed_by_the_peer_did_over_chain_and_cid() -> None:
    import hashlib
    import hmac

    expected = hmac.new(b"did:dfos:a", b"chainXcidY", hashlib.sha256).digest()
    assert score("did:dfos:a", "chainX", "cidY") == expected


def test_rank_is_deterministic_and_independent_of_input_order() -> None:
    first = rank(DIDS, "did:dfos:chain", "bafyop1")
    assert rank(list(reversed(DIDS)), "did:dfos:chain", "bafyop1") == first
    assert sorted(first) == sorted(DIDS)
    assert rank(DIDS, "did:dfos:chain", "bafyop2") != first  # per op


def test_rank_drops_duplicates() -> None:
    assert rank(["did:a", "did:b", "did:a"], "c", "x") == rank(["did:a", "did:b"], "c", "x")


@pytest.mark.parametrize(
    ("peers", "k"),
    [(0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4), (16, 4), (17, 5), (64, 5),
     (1000, 5)],
)  # fmt: skip
def test_coordinator_count_is_ceil_log2_clamped_to_2_and_5(peers: int, k: int) -> None:
    assert coordinator_count(peers) == k


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 16, 33, 64])
def test_shares_partition_the_remaining_peers(size: int) -> None:
    dids = DIDS[:size]
    for op in range(20):
        ranked = rank(dids, "chain", f"cid{op}")
        dealt = shares(ranked)
        top = coordinators(ranked)
        assert list(dealt) == top
        forwarded = [did for share in dealt.values() for did in share]
        assert sorted(forwarded) == sorted(set(dids) - set(top))  # disjoint and complete
        sizes = [len(s) for s in dealt.values()]
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("size", [5, 8, 16, 32, 64])
def test_origin_pushes_per_op_stay_within_ceil_log2_plus_one(size: int) -> None:
    for op in range(50):
        assert len(coordinators(rank(DIDS[:size], "chain", f"cid{op}"))) <= (
            math.ceil(math.log2(size)) + 1
        )


def test_a_coordinator_finds_its_share_from_the_origins_list_alone() -> None:
    dids = DIDS[:16]
    ranked = rank(dids, "chain", "cid")
    for did, share in shares(ranked).items():
        assert share_of(did, reversed(dids), "chain", "cid") == share
    assert share_of(ranked[-1], dids, "chain", "cid") is None  # not a coordinator


def test_the_hop_header_names_a_coordinator_or_the_one_a_stand_in_replaces() -> None:
    from peer.base import coordinator_hop

    assert coordinator_hop("1") == (True, None)
    assert coordinator_hop("1:did:dfos:abc") == (True, "did:dfos:abc")
    for other in (None, "2", "", "1:", "1:nodid", "1:did:" + "x" * 200, "1:did:a\nb"):
        assert coordinator_hop(other) == (False, None), other
