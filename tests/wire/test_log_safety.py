"""``shared.wire.log_safety``: any client input becomes a bounded, escaped log line without its secrets,
and rendering it never raises."""

from __future__ import annotations

import json
import logging
import string
import sys
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shared.wire.log_safety import SafeRecords, redact, safe_text, safe_value

SECRET_ALPHABET = string.ascii_letters + string.digits + "-_."
secrets_ = st.text(SECRET_ALPHABET, min_size=12, max_size=400).filter(lambda s: s.strip("-_.") == s)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)
SHAPES = (
    "token={}",
    "/?sessionId=abc&token={}&x=1",
    "id_token={}",
    "password={}",
    '{{"password": "{}"}}',
    '{{\\"PASSWORD\\":\\"{}\\"}}',
    "Authorization: Bearer {}",
    "authorization={}",
    "Bearer {}",
    "client_secret: {}",
    "X-Amz-Security-Token: {}",
)


def nested(depth: int, kind: str = "list") -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


@settings(max_examples=300, deadline=None)
@given(text=st.text(), limit=st.integers(min_value=0, max_value=400))
def test_any_text_is_bounded_escaped_and_writable(text: str, limit: int) -> None:
    line = safe_text(text, limit)
    data = line.encode("utf-8")  # never a lone surrogate
    assert len(data) <= limit
    assert not any(ord(char) < 0x20 or 0xD800 <= ord(char) < 0xE000 for char in line)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2000), limit=st.integers(min_value=0, max_value=300))
def test_any_bytes_are_bounded(data: bytes, limit: int) -> None:
    assert len(safe_text(data, limit).encode("utf-8")) <= limit


@settings(max_examples=300, deadline=None)
@given(
    secret=secrets_,
    shape=st.sampled_from(SHAPES),
    before=st.text(max_size=60),
    after=st.text(max_size=60),
    limit=st.integers(min_value=0, max_value=2000),
)
def test_no_secret_survives(secret: str, shape: str, before: str, after: str, limit: int) -> None:
    assume(secret not in before + after)
    # what follows a secret ends it (a delimiter), as in a URL, a header or JSON
    line = safe_text(before + " " + shape.format(secret) + "&" + after, limit)
    assert secret not in line
    assert secret[:10] not in line


@settings(max_examples=200, deadline=None)
@given(value=json_values, limit=st.integers(min_value=0, max_value=500))
def test_any_json_value_is_bounded_and_writable(value: Any, limit: int) -> None:
    line = safe_value(value, limit)
    assert len(line.encode("utf-8")) <= limit


@settings(max_examples=100, deadline=None)
@given(secret=secrets_, value=json_values, key=st.sampled_from(["password", "token", "Authorization", "refreshToken"]))
def test_members_named_like_secrets_are_redacted(secret: str, value: Any, key: str) -> None:
    assume(secret not in json.dumps(value))
    line = safe_value({"data": value, key: secret}, 100_000)
    assert secret not in line
    assert f'"{key}":"***"' in line


def test_nesting_far_past_the_recursion_limit_never_raises() -> None:
    depth = sys.getrecursionlimit() * 50
    for kind in ("list", "dict"):
        line = safe_value(nested(depth, kind), 120)
        assert len(line.encode()) <= 120 and line.endswith("…")
    assert safe_text("[" * 4500 + "]" * 4500, 60).startswith("[[[")


def test_huge_numbers_and_odd_objects_are_shown_by_type() -> None:
    assert safe_value(10**5000) == "<int of 16610 bits>"
    assert safe_value([float("nan"), float("inf"), -0.0]) == "[nan,inf,-0.0]"

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert safe_value({"x": Hostile()}) == '{"x":<Hostile>}'
    assert safe_value(ValueError("token=abc")) == "<ValueError>"


def test_readable_text_is_left_readable() -> None:
    assert safe_text("open main.py, line 12") == "open main.py, line 12"
    assert safe_text("fix the bug \ud83d\n") == "fix the bug \\ud83d\\x0a"
    assert redact("/?sessionId=abc&token=eyJhbGciOi.eyJzdWIi.c2ln&x=1") == "/?sessionId=abc&token=***&x=1"
    assert redact("a JWT alone eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln here") == "a JWT alone *** here"
    assert safe_text("é" * 100, 11) == "éééé…"  # cut between characters, within 11 bytes


def test_a_library_record_is_rendered_safely() -> None:
    record = logging.LogRecord("websockets", logging.DEBUG, "x", 1, "< GET %s HTTP/1.1", ("/?token=abc",), None)
    assert SafeRecords().filter(record)
    assert record.getMessage() == "< GET /?token=*** HTTP/1.1"
    broken = logging.LogRecord("x", logging.INFO, "x", 1, "%s %s", ("one",), None)
    assert SafeRecords().filter(broken) and broken.getMessage() == "%s %s"
