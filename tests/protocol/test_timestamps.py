"""createdAt: ISO 8601 with explicit zone -> epoch milliseconds; formatted like
JavaScript ``toISOString``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.protocol import MalformedError, format_timestamp, parse_timestamp

BASE_MS = 1772841600000  # 2026-03-07T00:00:00.000Z


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        pytest.param("2026-03-07T00:00:00.000Z", BASE_MS, id="vector-form"),
        pytest.param("2026-03-07T00:00:00Z", BASE_MS, id="no-fraction"),
        pytest.param("2026-03-07T00:00:00.5Z", BASE_MS + 500, id="one-digit-fraction"),
        pytest.param("2026-03-07T00:00:00.123456Z", BASE_MS + 123, id="micro-truncated"),
        pytest.param("2026-03-07T01:30:00.000+01:30", BASE_MS, id="positive-offset"),
        pytest.param("2026-03-06T23:00:00.000-01:00", BASE_MS, id="negative-offset"),
        pytest.param("2026-03-07T00:00:00.000+00:00", BASE_MS, id="zero-offset"),
        pytest.param("1970-01-01T00:00:00.000Z", 0, id="epoch"),
        pytest.param("1969-12-31T23:59:59.999Z", -1, id="before-epoch"),
        pytest.param("2024-02-29T00:00:00.000Z", 1709164800000, id="leap-day"),
    ],
)
def test_parse_timestamp(text: str, ms: int) -> None:
    assert parse_timestamp(text) == ms


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-03-07T00:00:00.000", id="no-zone"),
        pytest.param("2026-03-07 00:00:00.000Z", id="space-separator"),
        pytest.param("2026-03-07t00:00:00.000z", id="lowercase"),
        pytest.param("2026-03-07T00:00Z", id="no-seconds"),
        pytest.param("2026-3-7T00:00:00Z", id="unpadded"),
        pytest.param("2026-13-01T00:00:00Z", id="month-13"),
        pytest.param("2025-02-29T00:00:00Z", id="not-a-leap-year"),
        pytest.param("2026-03-07T24:00:00Z", id="hour-24"),
        pytest.param("2026-03-07T00:00:60Z", id="leap-second"),
        pytest.param("2026-03-07T00:00:00.Z", id="empty-fraction"),
        pytest.param("2026-03-07T00:00:00+0100", id="offset-without-colon"),
        pytest.param("2026-03-07T00:00:00+24:00", id="offset-out-of-range"),
        pytest.param("\u0662\u0660\u0662\u0666-03-07T00:00:00Z", id="non-ascii-digits"),
        pytest.param("", id="empty"),
    ],
)
def test_parse_timestamp_rejects(text: str) -> None:
    with pytest.raises(MalformedError):
        parse_timestamp(text)


def test_format_timestamp_is_to_iso_string() -> None:
    assert format_timestamp(BASE_MS) == "2026-03-07T00:00:00.000Z"
    assert format_timestamp(BASE_MS + 60_123) == "2026-03-07T00:01:00.123Z"
    assert format_timestamp(-1) == "1969-12-31T23:59:59.999Z"


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_round_trip_against_datetime(dt: datetime) -> None:
    dt = dt.replace(microsecond=dt.microsecond // 1000 * 1000, tzinfo=UTC)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    ms = (dt - epoch) // timedelta(milliseconds=1)
    text = format_timestamp(ms)
    assert (
        text
        == f"{dt.year:04d}-" + dt.strftime("%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    )
    assert parse_timestamp(text) == ms
