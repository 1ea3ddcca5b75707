"""createdAt on the wire: exactly ``YYYY-MM-DDTHH:MM:SS.sssZ`` (PROTOCOL.md
"Operation Schemas": ISO 8601, ms precision, UTC). Other spellings of an
instant are not the same op: the reference schema (``z.iso.datetime`` with
``offset: false, precision: 3``) rejects them, and ordering compares the text."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from relay.protocol import (
    TYP_IDENTITY,
    MalformedError,
    decode_jws,
    identity_create_payload,
    parse_artifact,
    parse_beacon,
    parse_content_operation,
    parse_countersign,
    parse_identity_operation,
    sign_operation,
    verify_identity_genesis,
)
from relay.protocol.builders import (
    artifact_payload,
    beacon_payload,
    content_create_payload,
    countersign_payload,
)

from .conftest import CREATOR_DID, NOW_MS, ref_key

K1 = ref_key(1)
CID = "bafyreihp6omsp6icc6ee63ox2ovsaxm6s7ikd2a7k5eh2qz2qd5soh5bsa"
Parse = Callable[[dict[str, object]], object]
Build = Callable[[str], dict[str, object]]
ROOT = "7e80d4780f454e0fca0b090d8c646f572b49354f54154531606105aad2fda28e"

NOT_WIRE_FORM = [
    pytest.param("2026-03-07T00:00:00Z", id="no-fraction"),
    pytest.param("2026-03-07T00:00:00.5Z", id="one-digit-fraction"),
    pytest.param("2026-03-07T00:00:00.0001Z", id="sub-millisecond"),
    pytest.param("2026-03-07T01:00:00.000+01:00", id="offset"),
    pytest.param("2026-03-07T00:00:00.000+00:00", id="zero-offset"),
]

PARSERS = [
    pytest.param(
        parse_identity_operation,
        lambda at: identity_create_payload([K1], [K1], [K1], at),
        id="identity",
    ),
    pytest.param(
        parse_content_operation,
        lambda at: content_create_payload(CREATOR_DID, CID, at),
        id="content",
    ),
    pytest.param(parse_beacon, lambda at: beacon_payload(CREATOR_DID, ROOT, at), id="beacon"),
    pytest.param(
        parse_artifact,
        lambda at: artifact_payload(CREATOR_DID, {"$schema": "s"}, at),
        id="artifact",
    ),
    pytest.param(
        parse_countersign, lambda at: countersign_payload(CREATOR_DID, CID, at), id="countersign"
    ),
]


@pytest.mark.parametrize(("parse", "build"), PARSERS)
@pytest.mark.parametrize("created_at", NOT_WIRE_FORM)
def test_created_at_must_be_ms_precision_utc(parse: Parse, build: Build, created_at: str) -> None:
    with pytest.raises(MalformedError, match="createdAt"):
        parse(build(created_at))


@pytest.mark.parametrize(("parse", "build"), PARSERS)
def test_created_at_wire_form_is_accepted(parse: Parse, build: Build) -> None:
    parse(build("2026-03-07T00:00:00.000Z"))


def test_identity_genesis_with_second_precision_created_at_is_rejected() -> None:
    payload = identity_create_payload([K1], [K1], [K1], "2026-03-07T00:00:00Z")
    token = sign_operation(TYP_IDENTITY, payload, K1, K1.key_id).token
    with pytest.raises(MalformedError):
        verify_identity_genesis(decode_jws(token), NOW_MS)
