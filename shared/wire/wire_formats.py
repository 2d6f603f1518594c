"""The protocol's string formats: session ids (UUID v4) and timestamps (RFC 3339), checked the
same way by the event models (``shared.wire.protocol``), the handshake and the JSON Schema."""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime

UUID_V4_PATTERN = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", re.IGNORECASE | re.ASCII
)
# RFC 3339 section 5.6 ``date-time``, in a syntax both Python and ECMA-262 (the JSON Schema) read:
# ASCII digits only (``[0-9]``, never ``\d``), T/t and Z/z in either case (section 5.6 allows
# lower case), a fraction of 1 to 9 digits (nanoseconds: the finest any client platform writes),
# a numeric offset within +-23:59. Whether the day exists in its month and whether a second 60
# is a leap second is checked in code (``is_rfc3339_timestamp``).
TIMESTAMP_SYNTAX = (
    r"([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"[Tt]([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(?:\.[0-9]{1,9})?"
    r"(?:[Zz]|([+-])([01][0-9]|2[0-3]):([0-5][0-9]))"
)
TIMESTAMP_PATTERN = re.compile(TIMESTAMP_SYNTAX)
MINUTES_PER_DAY = 24 * 60


def is_uuid_v4(value: object) -> bool:
    """True for a canonical (hyphenated) UUID version 4 string, as sessionIds must be."""
    return isinstance(value, str) and UUID_V4_PATTERN.fullmatch(value) is not None


def is_rfc3339_timestamp(value: object) -> bool:
    """True for an RFC 3339 ``date-time`` whose date and time exist.

    Accepted: ``2025-01-15T10:30:00Z`` (Swift's ``.iso8601``), ``2025-01-15T10:30:00.000Z``
    (JavaScript's ``toISOString``), ``2025-01-15t12:30:00.123456789+02:00``, ``-00:00``.
    A second ``60`` is accepted only where RFC 3339 section 5.7 puts a leap second: the last
    second of a month in UTC (23:59:60Z, shifted by the offset). Leap seconds cannot be predicted,
    so any month end is allowed rather than a table of past ones.
    """
    if not isinstance(value, str):
        return False
    match = TIMESTAMP_PATTERN.fullmatch(value)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(part) for part in match.group(1, 2, 3, 4, 5, 6))
    days_in_month = calendar.monthrange(year, month)[1]  # proleptic Gregorian, year 0000 included
    if day > days_in_month:
        return False
    if second < 60:
        return True
    sign, offset_hours, offset_minutes = match.group(7, 8, 9)
    offset = 0 if sign is None else (int(offset_hours) * 60 + int(offset_minutes)) * (1 if sign == "+" else -1)
    day_shift, utc_minute = divmod(hour * 60 + minute - offset, MINUTES_PER_DAY)  # day_shift is -1, 0 or 1
    if utc_minute != MINUTES_PER_DAY - 1:
        return False
    if day_shift < 0:  # the UTC date is the day before: the last of the previous month only on the 1st
        return day == 1
    return day + day_shift == days_in_month


def timestamp_seconds(value: str) -> float | None:
    """An RFC 3339 timestamp as epoch seconds (a leap second counts as the second before it);
    None when it is not one."""
    if not is_rfc3339_timestamp(value):
        return None
    match = TIMESTAMP_PATTERN.fullmatch(value)
    assert match is not None
    text = value.upper()
    if match.group(6) == "60":
        start = match.start(6)
        text = f"{text[:start]}59{text[start + 2 :]}"
    return datetime.fromisoformat(text).timestamp()


def format_timestamp(epoch_seconds: float) -> str:
    """An epoch time as the protocol writes timestamps: UTC, milliseconds, ``Z``."""
    moment = datetime.fromtimestamp(max(0.0, epoch_seconds), UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
