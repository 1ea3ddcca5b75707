"""ISO 8601 ``createdAt`` timestamps <-> epoch milliseconds.

Role: every ordering rule (strictly increasing ``createdAt``, future guards,
head selection) compares integer epoch milliseconds produced here.

Invariants: ``parse_timestamp`` accepts only ``YYYY-MM-DDTHH:MM:SS[.fraction]``
followed by ``Z`` or an explicit ``+HH:MM``/``-HH:MM`` offset (converted to UTC),
with real calendar dates and no leap second; fractions beyond milliseconds are
truncated, as JavaScript ``Date`` does. ``format_timestamp`` produces the
``Date.prototype.toISOString`` form (``2026-03-07T00:00:00.000Z``).
No clock is read here.
"""

from __future__ import annotations

import re

from .errors import MalformedError

__all__ = ["format_timestamp", "parse_timestamp"]

_TS_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]+))?(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))"
)
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MS_PER_DAY = 86_400_000


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_from_civil(y: int, m: int, d: int) -> int:
    # Howard Hinnant's days_from_civil: proleptic Gregorian date -> days since 1970-01-01.
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def parse_timestamp(text: str) -> int:
    """Parse an ISO 8601 timestamp with explicit zone to epoch milliseconds."""
    match = _TS_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise MalformedError("timestamp must be ISO 8601 like 2026-03-07T00:00:00.000Z")
    days = _days.get(text[:10])
    if days is None:
        days = _date_days(*map(int, match.group(1, 2, 3)))
        if len(_days) >= _DAYS_LIMIT:
            _days.clear()
        _days[text[:10]] = days
    hour, minute, second = map(int, match.group(4, 5, 6))
    if hour > 23 or minute > 59 or second > 59:
        raise MalformedError("timestamp date or time out of range")
    fraction = match.group(7)
    millis = int((fraction + "00")[:3]) if fraction else 0
    offset_ms = 0
    if match.group(8) is None:
        off_h, off_m = int(match.group(10)), int(match.group(11))
        if off_h > 23 or off_m > 59:
            raise MalformedError("timestamp offset out of range")
        offset_ms = (off_h * 60 + off_m) * 60_000
        if match.group(9) == "-":
            offset_ms = -offset_ms
    seconds = (hour * 60 + minute) * 60 + second
    return days * _MS_PER_DAY + seconds * 1000 + millis - offset_ms


# Days since the epoch by ``YYYY-MM-DD``: the ops of a stream share few dates.
# Pure, bounded, reset when full.
_DAYS_LIMIT = 4096
_days: dict[str, int] = {}


def _date_days(year: int, month: int, day: int) -> int:
    if not 1 <= month <= 12:
        raise MalformedError("timestamp month out of range")
    max_day = 29 if month == 2 and _is_leap(year) else _DAYS_IN_MONTH[month - 1]
    if not 1 <= day <= max_day:
        raise MalformedError("timestamp date or time out of range")
    return _days_from_civil(year, month, day)


def format_timestamp(ms: int) -> str:
    """Format epoch milliseconds like JavaScript ``toISOString`` (years 0000-9999)."""
    days, rem = divmod(ms, _MS_PER_DAY)
    year, month, day = _civil_from_days(days)
    if not 0 <= year <= 9999:
        raise ValueError("year out of range for ISO 8601 basic form")
    secs, millis = divmod(rem, 1000)
    hour, secs = divmod(secs, 3600)
    minute, second = divmod(secs, 60)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"
