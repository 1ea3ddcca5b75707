"""SHA-256 Merkle tree over content ids sorted by UTF-8 bytes; odd nodes promoted;
inclusion proofs walk sibling hashes with left/right positions."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.protocol import MalformedError, ProofStep, merkle_proof, merkle_root, verify_merkle_proof

from .conftest import vector

# PROTOCOL.md's prose lists wrong leaf hashes for bravo/charlie/delta (and thus wrong
# charlie||delta and level-2 hashes); the root, the charlie proof and merkle-tree.json are
# consistent with the values below, which are plain SHA-256 of the ids.
LEAVES = {
    "alpha": "8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8",
    "bravo": "f144a6907dc4284d1f9fe6a7d9b9ff53c02c1d07ba68f24d413d7ff7f757a782",
    "charlie": "b9dd960c1753459a78115d3cb845a57d924b6877e805b08bd01086ccdf34433c",
    "delta": "4f4a9410ffcdf895c4adb880659e9b5c0dd1f23a30790684340b3eaacb045398",
    "echo": "092c79e8f80e559e404bcf660c48f3522b67aba9ff1484b0367e1a4ddef7431d",
}


def test_vector_root() -> None:
    v = vector("merkle-tree")
    assert sorted(v["contentIds"]) == v["expected"]["sortedIds"]
    assert merkle_root(v["contentIds"]) == v["expected"]["root"]
    assert merkle_root(reversed(v["contentIds"])) == v["expected"]["root"]


@pytest.mark.parametrize(("content_id", "leaf"), list(LEAVES.items()), ids=list(LEAVES))
def test_leaf_hashes(content_id: str, leaf: str) -> None:
    assert hashlib.sha256(content_id.encode()).hexdigest() == leaf
    assert merkle_root([content_id]) == leaf


def test_charlie_proof_matches_vector() -> None:
    expected = vector("merkle-tree")["expected"]["charlieProof"]
    proof = merkle_proof(vector("merkle-tree")["contentIds"], "charlie")
    assert [step.to_json() for step in proof] == expected["path"]
    assert verify_merkle_proof("charlie", proof, expected["root"])


def test_vector_proof_wire_form_verifies() -> None:
    expected = vector("merkle-tree")["expected"]["charlieProof"]
    steps = [ProofStep(s["hash"], s["position"]) for s in expected["path"]]
    assert verify_merkle_proof(expected["contentId"], steps, expected["root"])
    assert not verify_merkle_proof("delta", steps, expected["root"])


def test_interior_hashes() -> None:
    leaf = {k: bytes.fromhex(v) for k, v in LEAVES.items()}
    ab = hashlib.sha256(leaf["alpha"] + leaf["bravo"]).digest()
    cd = hashlib.sha256(leaf["charlie"] + leaf["delta"]).digest()
    assert ab.hex() == "90d39555bb3c223e12f5a375c3011d2462fe2e1e36b8416a0b623d5831a9b4f3"
    top = hashlib.sha256(hashlib.sha256(ab + cd).digest() + leaf["echo"]).hexdigest()
    assert top == vector("merkle-tree")["expected"]["root"]


def test_empty_set_has_no_root() -> None:
    assert merkle_root([]) is None


def test_proof_for_missing_id_is_rejected() -> None:
    with pytest.raises(MalformedError):
        merkle_proof(["alpha"], "bravo")


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([ProofStep("zz", "left")], id="bad-hex"),
        pytest.param([ProofStep("00" * 31, "left")], id="short-hash"),
        pytest.param([ProofStep("00" * 32, "up")], id="bad-position"),  # type: ignore[arg-type]
    ],
)
def test_malformed_proofs_do_not_verify(steps: list[ProofStep]) -> None:
    assert not verify_merkle_proof("alpha", steps, merkle_root(["alpha", "bravo"]) or "")


@given(st.sets(st.text(min_size=1, max_size=12), min_size=1, max_size=40), st.data())
def test_every_member_has_a_valid_proof(ids: set[str], data: st.DataObject) -> None:
    root = merkle_root(ids)
    assert root is not None
    member = data.draw(st.sampled_from(sorted(ids)))
    proof = merkle_proof(ids, member)
    assert verify_merkle_proof(member, proof, root)
    assert len(proof) <= max(1, len(ids)).bit_length()
