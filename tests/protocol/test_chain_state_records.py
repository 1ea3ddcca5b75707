"""Verified states: camelCase wire shapes (WEB-RELAY.md "Identity State" /
"Content State") and lossless store records."""

from __future__ import annotations

import json

from relay.protocol import ContentState, IdentityState, MultikeyPublicKey, verify_content_chain

from .conftest import NOW_MS, ref_key, reference_identity_states, reference_resolver, vector


def _identity() -> IdentityState:
    k1, k2, k3 = (
        MultikeyPublicKey(k.key_id, "Multikey", k.multikey) for k in map(ref_key, (1, 2, 3))
    )
    return IdentityState("did:dfos:e3vvtck42d4eacdnzvtrn6", False, (k1, k3), (k2,), (k1, k2))


def test_identity_state_wire_shape() -> None:
    state = reference_identity_states()[-1]
    assert state.to_json() == {
        "did": "did:dfos:e3vvtck42d4eacdnzvtrn6",
        "isDeleted": False,
        "authKeys": vector("identity-rotation")["expected"]["controllerKeys"],
        "assertKeys": vector("identity-rotation")["expected"]["controllerKeys"],
        "controllerKeys": vector("identity-rotation")["expected"]["controllerKeys"],
    }


def test_identity_record_round_trips_through_json() -> None:
    state = _identity()
    assert IdentityState.from_record(json.loads(json.dumps(state.to_record()))) == state


def test_identity_key_lookups() -> None:
    state = _identity()
    k1, k2, k3 = (ref_key(n).key_id for n in (1, 2, 3))
    assert [k.id for k in state.all_keys()] == [k1, k3, k2, k1, k2]
    assert state.find_controller_key(k3) is None
    assert state.find_controller_key(k2) is not None
    found = state.find_key(k3)
    assert found is not None and found.public_key == ref_key(3).public_key
    assert state.find_key("key_unknown") is None


def test_content_state_record_round_trips_through_json() -> None:
    for name in ("content-lifecycle", "content-delete", "content-delegated"):
        state = verify_content_chain(vector(name)["chain"], reference_resolver(), NOW_MS).state
        assert ContentState.from_record(json.loads(json.dumps(state.to_record()))) == state
        assert set(state.to_json()) == {
            "contentId",
            "genesisCID",
            "headCID",
            "isDeleted",
            "currentDocumentCID",
            "length",
            "creatorDID",
        }
