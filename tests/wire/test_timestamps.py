"""The envelope's timestamp: any RFC 3339 ``date-time`` (section 5.6) whose date and time exist.

Strings are built from their parts here, independently of the parser: every one made of valid
parts parses; every mutation that breaks a part, the syntax or the ASCII digits is refused as
``invalid_event``. The exported JSON Schema's pattern agrees on the syntax.
"""

from __future__ import annotations

import calendar
import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.wire.protocol import ErrorCode, Event, ProtocolError, now_timestamp, parse_event
from shared.wire.schema_export import DEFAULT_PATH
from shared.wire.wire_formats import is_rfc3339_timestamp, timestamp_seconds

SCHEMA = json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))
SCHEMA_PATTERN = re.compile(SCHEMA["properties"]["timestamp"]["pattern"])
EXAMPLES = settings(max_examples=400, deadline=None, database=None)


@dataclass(frozen=True)
class Parts:
    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    fraction: str  # "" or the digits after "."
    separator: str  # "T" or "t"
    offset: str  # "Z", "z" or "+hh:mm" / "-hh:mm"

    def render(self) -> str:
        fraction = f".{self.fraction}" if self.fraction else ""
        return (
            f"{self.year:04d}-{self.month:02d}-{self.day:02d}{self.separator}"
            f"{self.hour:02d}:{self.minute:02d}:{self.second:02d}{fraction}{self.offset}"
        )


def frame(timestamp: object) -> str:
    return json.dumps(
        {
            "id": "E621E1F8-C36C-495A-93FC-0C247A3E6E5F",
            "timestamp": timestamp,
            "kind": {"userAudioTranscriptPartial": {"text": "hel"}},
        }
    )


def assert_accepted(timestamp: str) -> None:
    parsed = parse_event(frame(timestamp))
    assert isinstance(parsed, Event), f"{timestamp!r} refused: {parsed}"
    assert parsed.timestamp == timestamp
    assert SCHEMA_PATTERN.fullmatch(timestamp), f"{timestamp!r} outside the schema's pattern"


def assert_refused(timestamp: str) -> None:
    parsed = parse_event(frame(timestamp))
    assert isinstance(parsed, ProtocolError) and parsed.code == ErrorCode.INVALID_EVENT, f"{timestamp!r}: {parsed}"
    assert "timestamp" in parsed.message
    assert not is_rfc3339_timestamp(timestamp)


offsets = st.one_of(
    st.sampled_from(["Z", "z"]),
    st.builds(
        lambda sign, h, m: f"{sign}{h:02d}:{m:02d}", st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59)
    ),
)


@st.composite
def valid_parts(draw: st.DrawFn) -> Parts:
    year = draw(st.integers(0, 9999))
    month = draw(st.integers(1, 12))
    return Parts(
        year=year,
        month=month,
        day=draw(st.integers(1, calendar.monthrange(year, month)[1])),
        hour=draw(st.integers(0, 23)),
        minute=draw(st.integers(0, 59)),
        second=draw(st.integers(0, 59)),
        fraction=draw(st.text(alphabet="0123456789", max_size=9)),
        separator=draw(st.sampled_from("Tt")),
        offset=draw(offsets),
    )


@st.composite
def leap_seconds(draw: st.DrawFn) -> Parts:
    """23:59:60 UTC on the last day of a month, as written in some offset."""
    year, month = draw(st.integers(2, 9998)), draw(st.integers(1, 12))
    offset_minutes = draw(st.integers(-(24 * 60 - 1), 24 * 60 - 1))
    utc = datetime(year, month, calendar.monthrange(year, month)[1], 23, 59)
    local = utc + timedelta(minutes=offset_minutes)
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    offset = draw(st.sampled_from(["Z", "z"])) if offset_minutes == 0 else f"{sign}{hours:02d}:{minutes:02d}"
    return Parts(
        local.year, local.month, local.day, local.hour, local.minute, 60, draw(st.text("0123456789", max_size=9)),
        "T", offset,
    )  # fmt: skip


@EXAMPLES
@given(valid_parts())
def test_every_timestamp_built_from_valid_parts_parses(parts: Parts) -> None:
    assert_accepted(parts.render())


@EXAMPLES
@given(leap_seconds())
def test_a_leap_second_at_the_end_of_a_utc_month_parses(parts: Parts) -> None:
    assert_accepted(parts.render())


@EXAMPLES
@given(leap_seconds(), st.sampled_from([-1, 1]))
def test_second_60_anywhere_else_is_refused(parts: Parts, minutes: int) -> None:
    moved = datetime(2000 + parts.year % 400, parts.month, parts.day, parts.hour, parts.minute) + timedelta(
        minutes=minutes
    )
    # the same day shift in a 400-year-equivalent year, mapped back (the Gregorian calendar repeats every 400 years)
    year = parts.year + (moved.year - (2000 + parts.year % 400))
    assert_refused(
        replace(parts, year=year, month=moved.month, day=moved.day, hour=moved.hour, minute=moved.minute).render()
    )


NON_ASCII_DIGITS = [
    "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",  # Arabic-Indic
    "".join(chr(0xFF10 + d) for d in range(10)),  # full-width
    "".join(chr(0x0966 + d) for d in range(10)),  # Devanagari
    "".join(chr(0x1D7CE + d) for d in range(10)),  # mathematical bold
]


def _days_too_many(parts: Parts) -> Parts:
    return replace(parts, day=calendar.monthrange(parts.year, parts.month)[1] + 1)


PART_MUTATIONS = {
    "month 00": lambda p, n: replace(p, month=0),
    "month 13+": lambda p, n: replace(p, month=13 + n % 87),
    "day 00": lambda p, n: replace(p, day=0),
    "day past the month's end": lambda p, n: _days_too_many(p),
    "hour 24+": lambda p, n: replace(p, hour=24 + n % 76),
    "minute 60+": lambda p, n: replace(p, minute=60 + n % 40),
    "second 61+": lambda p, n: replace(p, second=61 + n % 39),
    "10+ fraction digits": lambda p, n: replace(p, fraction="0123456789" + "7" * (n % 5)),
    "offset hour 24+": lambda p, n: replace(p, offset=f"+{24 + n % 76}:00"),
    "offset minute 60+": lambda p, n: replace(p, offset=f"-01:{60 + n % 40}"),
    "offset without colon": lambda p, n: replace(p, offset="+0200"),
    "offset hours only": lambda p, n: replace(p, offset="-05"),
    "no offset": lambda p, n: replace(p, offset=""),
    "named zone": lambda p, n: replace(p, offset=["UTC", "GMT", " Z", "Z+02:00", "+02:00Z"][n % 5]),
    "space separator": lambda p, n: replace(p, separator=" "),
    "other separator": lambda p, n: replace(p, separator=["_", "", "TT", "\u0422"][n % 4]),  # U+0422: Cyrillic Te
}

TEXT_MUTATIONS = {
    "leading space": lambda s, n: " " + s,
    "trailing space": lambda s, n: s + " ",
    "trailing newline": lambda s, n: s + "\n",
    "two-digit year": lambda s, n: s[2:],
    "five-digit year": lambda s, n: str(1 + n % 9) + s,
    "comma fraction": lambda s, n: s[:19] + ",5" + s[19:],
    "dot without digits": lambda s, n: re.sub(r"^(.{19})(\.[0-9]*)?", r"\1.", s),
    "a character deleted": lambda s, n: _delete_outside_fraction(s, n),
    "non-ASCII digit": lambda s, n: _foreign_digit(s, n),
}


def _delete_outside_fraction(text: str, n: int) -> str:
    match = re.fullmatch(r"(.{19})(\.[0-9]*)?(.*)", text)
    assert match is not None
    fraction = match.group(2) or ""
    positions = [i for i in range(len(text)) if not 20 <= i < 19 + len(fraction)]  # keeps the "." itself
    position = positions[n % len(positions)]
    return text[:position] + text[position + 1 :]


def _foreign_digit(text: str, n: int) -> str:
    positions = [i for i, char in enumerate(text) if char.isdigit()]
    position = positions[n % len(positions)]
    digits = NON_ASCII_DIGITS[n % len(NON_ASCII_DIGITS)]
    return text[:position] + digits[int(text[position])] + text[position + 1 :]


@EXAMPLES
@given(valid_parts(), st.sampled_from(sorted(PART_MUTATIONS)), st.integers(0, 10_000))
def test_a_broken_part_is_refused(parts: Parts, mutation: str, n: int) -> None:
    assert_refused(PART_MUTATIONS[mutation](parts, n).render())


@EXAMPLES
@given(valid_parts(), st.sampled_from(sorted(TEXT_MUTATIONS)), st.integers(0, 10_000))
def test_a_mangled_string_is_refused(parts: Parts, mutation: str, n: int) -> None:
    assert_refused(TEXT_MUTATIONS[mutation](parts.render(), n))


@pytest.mark.parametrize(
    "timestamp",
    [
        "2025-01-15T10:30:00Z",  # Swift JSONEncoder .iso8601
        "2025-01-15T10:30:00.000Z",  # JavaScript toISOString, the spec's examples
        "2025-01-15T10:30:00.123456789+05:30",
        "2025-01-15t10:30:00z",
        "2025-01-15T10:30:00-00:00",  # RFC 3339 4.3: UTC, local offset unknown
        "2024-02-29T23:59:59.9Z",
        "2000-02-29T00:00:00Z",
        "0000-02-29T00:00:00Z",  # year 0 is a leap year in the proleptic Gregorian calendar
        "2016-12-31T23:59:60Z",  # the last leap second so far
        "2017-01-01T08:59:60+09:00",  # the same instant in Tokyo
        "2016-12-31T18:59:60.5-05:00",
        "2015-06-30T23:59:60Z",
    ],
)
def test_rfc3339_examples_are_accepted(timestamp: str) -> None:
    assert_accepted(timestamp)


@pytest.mark.parametrize(
    "timestamp",
    [
        "2025-02-29T10:30:00Z",
        "1900-02-29T10:30:00Z",  # divisible by 100, not by 400
        "2025-04-31T10:30:00Z",
        "2025-01-15T10:30:00",
        "2025-01-15 10:30:00Z",
        "2025-01-15T10:30Z",
        "2025-01-15",
        "2025-01-15T10:30:00.Z",
        "2016-12-31T23:59:60+01:00",  # 22:59:60 UTC
        "2016-12-30T23:59:60Z",
        "2016-12-31T23:58:60Z",
        "20250115T103000Z",  # ISO 8601 basic format, not RFC 3339
        "2025-W03-3T10:30:00Z",
        "yesterday",
        "",
    ],
)
def test_non_rfc3339_examples_are_refused(timestamp: str) -> None:
    assert_refused(timestamp)


@pytest.mark.parametrize("value", [None, 1736937000, 1736937000.5, ["2025-01-15T10:30:00Z"], {"iso": "x"}, True])
def test_a_timestamp_that_is_not_a_string_is_refused(value: object) -> None:
    parsed = parse_event(frame(value))
    assert isinstance(parsed, ProtocolError) and parsed.code == ErrorCode.INVALID_EVENT


def test_the_conductor_writes_utc_milliseconds_and_z() -> None:
    written = now_timestamp()
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z", written)
    assert_accepted(written)


def test_the_schema_describes_the_rule_and_refuses_what_its_pattern_can() -> None:
    timestamp = SCHEMA["properties"]["timestamp"]
    assert timestamp["format"] == "date-time" and "RFC 3339" in timestamp["description"]
    for good in ("2025-01-15T10:30:00Z", "2025-01-15t10:30:00.5-05:30"):
        jsonschema.validate(json.loads(frame(good)), SCHEMA)
    for bad in ("2025-01-15T10:30:00", "2025-13-15T10:30:00Z", "2025-01-15T24:00:00Z", "2025-01-15T10:30:00+0200"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(frame(bad)), SCHEMA)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2025-01-15T10:30:00Z", 1736937000.0),
        ("2025-01-15t10:30:00.25z", 1736937000.25),
        ("2025-01-15T12:30:00.5+02:00", 1736937000.5),
        ("2016-12-31T23:59:60Z", 1483228799.0),  # a leap second counts as the second before it
    ],
)
def test_a_timestamp_reads_as_epoch_seconds(value: str, seconds: float) -> None:
    assert timestamp_seconds(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "yesterday", "2025-02-30T10:00:00Z", "2025-01-15 10:30:00Z"])
def test_what_is_not_a_timestamp_has_no_seconds(value: str) -> None:
    assert timestamp_seconds(value) is None
