"""``check_typ_not_future``: the future guard of an op's typ (24 h; beacons
5 min; none for countersignatures) applied to a payload that cannot be
verified yet, so a relay can reject it rather than park it. It raises
exactly what verification would; a createdAt that does not parse is left
to verification."""

from __future__ import annotations

import pytest

from relay.protocol import (
    TYP_ARTIFACT,
    TYP_BEACON,
    TYP_CONTENT,
    TYP_COUNTERSIGN,
    TYP_IDENTITY,
    Ed25519Keypair,
    FutureTimestampError,
    check_typ_not_future,
    decode_jws,
    format_timestamp,
    sign_operation,
)

NOW_MS = 1_767_225_600_000
HOUR_MS = 3600 * 1000
KEY = Ed25519Keypair.from_seed(bytes([7]) * 32)


def _signed(typ: str, created_at: object) -> str:
    payload = {"version": 1, "type": "update", "createdAt": created_at}
    return sign_operation(typ, payload, KEY, KEY.key_id).token


@pytest.mark.parametrize(
    ("typ", "ahead_ms", "window"),
    [
        (TYP_IDENTITY, 24 * HOUR_MS + 1, "24h"),
        (TYP_CONTENT, 24 * HOUR_MS + 1, "24h"),
        (TYP_ARTIFACT, 24 * HOUR_MS + 1, "24h"),
        (TYP_BEACON, 5 * 60 * 1000 + 1, "5min"),
    ],
)
def test_beyond_the_guard_raises_the_verifiers_error(typ: str, ahead_ms: int, window: str) -> None:
    decoded = decode_jws(_signed(typ, format_timestamp(NOW_MS + ahead_ms)))
    with pytest.raises(FutureTimestampError, match=f"more than {window} in the future"):
        check_typ_not_future(decoded, NOW_MS)
    check_typ_not_future(decoded, NOW_MS + 1)  # on the bound: passes


@pytest.mark.parametrize(
    ("typ", "created_at"),
    [
        (TYP_COUNTERSIGN, format_timestamp(NOW_MS + 48 * HOUR_MS)),  # no guard specified
        (TYP_IDENTITY, "next year"),  # malformed: verification says so
        (TYP_IDENTITY, 12),
    ],
)
def test_what_has_no_guard_or_no_parsable_date_passes(typ: str, created_at: object) -> None:
    check_typ_not_future(decode_jws(_signed(typ, created_at)), NOW_MS)
