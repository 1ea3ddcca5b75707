"""The hot-path records get a faster constructor (``quick_init``) and stay the
frozen dataclasses they were: same signature and defaults, equality, hash and
repr, and no assignment after construction."""

from __future__ import annotations

import dataclasses

import pytest

from relay.protocol import DecodedJws, MultikeyPublicKey
from relay.protocol.records import quick_init
from relay.rules.outcomes import IngestionResult, RejectReason, Status


def test_defaults_and_keywords_work_as_before() -> None:
    plain = IngestionResult("bafy", Status.NEW)
    assert (plain.kind, plain.error, plain.reason, plain.waits_for) == (None, None, None, None)
    full = IngestionResult("bafy", Status.REJECTED, reason=RejectReason.MALFORMED, error="bad")
    assert full.reason is RejectReason.MALFORMED and full.error == "bad"
    with pytest.raises(TypeError):
        IngestionResult("bafy")  # type: ignore[call-arg]


def test_equality_hash_and_repr_are_the_dataclass_ones() -> None:
    a = MultikeyPublicKey("k1", "Multikey", "z6Mk")
    b = MultikeyPublicKey(id="k1", type="Multikey", public_key_multibase="z6Mk")
    assert a == b and hash(a) == hash(b) and {a, b} == {a}
    assert repr(a) == "MultikeyPublicKey(id='k1', type='Multikey', public_key_multibase='z6Mk')"
    assert dataclasses.replace(a, id="k2").id == "k2"


def test_records_stay_frozen() -> None:
    decoded = DecodedJws("t", {}, {}, b"", b"")
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.token = "other"  # type: ignore[misc]
    assert decoded.payload_cid is None and decoded.verified_key is None


def test_only_plain_frozen_slotted_dataclasses_are_accepted() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        x: list[int] = dataclasses.field(default_factory=list)

    for cls in (Mutable, Factory):
        with pytest.raises(TypeError):
            quick_init(cls)
