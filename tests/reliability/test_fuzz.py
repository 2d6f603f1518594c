"""Bad input, generated: whatever the app (or anyone holding a connection) sends, the handler
returns 200, answers with the protocol's error code (or nothing, for an ignored kind), and the
session stays usable.

Frames go through ``lambdas.message.handler`` with API-Gateway-shaped events (``send_raw``). A
small oracle, written from the spec (not from the parser), says what each frame must get back:

* ``invalid_json``: no body, not base64 (binary frames), not UTF-8, not JSON (nesting too deep
  for the parser counts as not JSON);
* ``frame_too_large``: more bytes than the frame limit;
* ``invalid_event``: not an object, a string that is not Unicode text (a lone surrogate), a bad
  envelope (id not a UUID string, timestamp not an RFC 3339 date-time in ASCII digits that
  exists, kind not exactly one key, seq not an integer), a known kind whose payload has a missing field,
  a wrong type or a bad length; a sessionStart for another session;
* nothing: an unknown kind (the spec's forward compatibility), a kind the app need not send,
  a duplicate of one of the latest event ids taken (``shared.core.event_ids``);
* ``transcript_too_long`` / ``empty_transcript`` / ``no_pending_tool_call``: as the spec says;
* a turn (``convo.setState thinking`` first) for a good transcript.

Each test ends with a normal turn on the same session and checks its history. The number of
examples run is printed in the terminal summary. RELIABILITY_FUZZ_SCALE multiplies the counts.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.core import event_ids
from shared.wire.protocol import MAX_FRAME_DEPTH, Event
from tests.handlers.conftest import Connection, Harness, summarize
from tests.history_check import assert_valid_history
from tests.reliability.figures import count
from tests.reliability.support import (
    IDLE,
    OK,
    THINKING,
    RoutingResponder,
    answers_tools,
    errors,
    events_since,
    frame,
    frame_count,
    model_calls,
    non_partial,
    release_moto_copies,
    request_texts,
    seqs,
)

SCALE = float(os.environ.get("RELIABILITY_FUZZ_SCALE", "1"))
MAX_FRAME = 128 * 1024
MAX_TRANSCRIPT = 8000
INTERRUPTED = "audio.output.interrupted"


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=examples(n),
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )


# ---- the oracle ------------------------------------------------------------------------------

# RFC 3339 section 5.6 date-time (T/Z in either case), at most 9 fraction digits, ASCII digits only
RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt](?P<h>[0-9]{2}):(?P<m>[0-9]{2}):(?P<s>[0-9]{2})(\.[0-9]{1,9})?"
    r"(?P<offset>[Zz]|[+-][0-9]{2}:[0-9]{2})",
    re.ASCII,
)


def good_timestamp(value: object) -> bool:
    """The date exists (the Gregorian calendar repeats every 400 years, which brings year 0000
    into datetime's range), the time exists, and a second 60 is a leap second: 23:59:60 UTC on
    the last day of a month (RFC 3339 section 5.7)."""
    match = RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return False
    year, month, day = (int(part) for part in match["date"].split("-"))
    hour, minute, second = int(match["h"]), int(match["m"]), int(match["s"])
    offset = match["offset"].upper()
    offset_hours, offset_minutes = (0, 0) if offset == "Z" else (int(offset[1:3]), int(offset[4:6]))
    if hour > 23 or minute > 59 or second > 60 or offset_hours > 23 or offset_minutes > 59:
        return False
    try:
        local = datetime(2000 + year % 400, month, day, hour, minute)
    except ValueError:
        return False
    if second < 60:
        return True
    shift = timedelta(hours=offset_hours, minutes=offset_minutes) * (-1 if offset.startswith("-") else 1)
    utc = local - shift
    return (utc.hour, utc.minute) == (23, 59) and (utc + timedelta(days=1)).day == 1


def good_uuid(value: object) -> bool:
    """The spellings a UUID string may take (hyphenated, plain hex, braces, urn:uuid:), any case."""
    if not isinstance(value, str):
        return False
    body = value[9:] if value.lower().startswith("urn:uuid:") else value
    body = body[1:-1] if body.startswith("{") and body.endswith("}") else body
    return bool(
        re.fullmatch(r"[0-9a-fA-F]{32}", body)
        or re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", body)
    )


def strict_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Not JSON for the conductor (docs/protocol.md): NaN and Infinity, a number literal over 100
# characters or past a float's range, nesting deeper than MAX_FRAME_DEPTH.
def not_json(name: str) -> Any:
    raise ValueError(name)


def short_int(literal: str) -> int:
    if len(literal) > 100:
        raise ValueError("number too long")
    return int(literal)


def short_finite_float(literal: str) -> float:
    if len(literal) > 100 or float(literal) in (float("inf"), float("-inf")):
        raise ValueError("number too long or too large")
    return float(literal)


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    return 0


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str  # "str" | "int"
    required: bool = True
    nullable: bool = False
    min_len: int | None = None
    max_len: int | None = None
    ge: int | None = None

    def accepts(self, payload: dict[str, Any]) -> bool:
        if self.name not in payload:
            return not self.required
        value = payload[self.name]
        if value is None:
            return self.nullable
        if self.type == "int":
            return strict_int(value) and (self.ge is None or value >= self.ge)
        if not isinstance(value, str):
            return False
        return (self.min_len is None or len(value) >= self.min_len) and (
            self.max_len is None or len(value) <= self.max_len
        )


#: every kind of the spec and its fields, as the spec and the protocol module document them
KIND_FIELDS: dict[str, list[FieldSpec]] = {
    "sessionStart": [
        FieldSpec("sessionId", "str", min_len=1, max_len=128),
        FieldSpec("lastSeq", "int", required=False, nullable=True, ge=0),
    ],
    "userAudioTranscriptPartial": [FieldSpec("text", "str")],
    "userAudioTranscriptFinal": [FieldSpec("text", "str")],
    "assistantSpeechPartial": [FieldSpec("text", "str")],
    "assistantSpeechFinal": [FieldSpec("text", "str")],
    "assistantUIPatch": [FieldSpec("patch", "str")],
    "toolCall": [
        FieldSpec("callId", "str", min_len=1, max_len=256),
        FieldSpec("name", "str", min_len=1, max_len=256),
        FieldSpec("arguments", "str"),
    ],
    "toolResult": [
        FieldSpec("callId", "str", min_len=1, max_len=256),
        FieldSpec("result", "str", required=False, nullable=True),
        FieldSpec("error", "str", required=False, nullable=True),
    ],
    "error": [FieldSpec("code", "str", min_len=1, max_len=128), FieldSpec("message", "str", required=False)],
}


@dataclass(frozen=True)
class Expect:
    """What one frame must get back: ``error`` code, ``nothing``, a ``turn``, or ``no_error``."""

    outcome: str
    code: str | None = None
    replies: tuple[tuple[Any, ...], ...] | None = None  # exact replies, when known
    replay: bool = False  # a sessionStart with lastSeq: kept events may be re-sent too
    label: str | None = None  # how the figures name this outcome


def error_(code: str) -> Expect:
    return Expect("error", code)


NOTHING = Expect("nothing")
DUPLICATE = Expect("nothing", label="duplicate id: ignored")
TURN = Expect("turn")


def has_lone_surrogate(value: Any) -> bool:
    """A string (key or value) that is not Unicode text: JSON can spell it (``"\\ud800"``), UTF-8 cannot."""
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, list):
        return any(has_lone_surrogate(item) for item in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(key) or has_lone_surrogate(item) for key, item in value.items())
    return False


@dataclass
class Oracle:
    session_id: str
    claimed: list[str] = field(default_factory=list)  # the latest ids taken, oldest first
    turn_open: bool = False

    def expect(self, body: str | None, *, is_base64: bool = False) -> Expect:
        if body is None:
            return error_("invalid_json")
        if is_base64:
            try:
                raw = base64.b64decode(body, validate=True)
            except ValueError:  # not base64: too large if it could not decode to the limit anyway
                return error_("frame_too_large" if len(body) > (MAX_FRAME // 3 + 1) * 4 else "invalid_json")
            if len(raw) > MAX_FRAME:
                return error_("frame_too_large")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                return error_("invalid_json")
        else:
            if len(body.encode("utf-8", "surrogatepass")) > MAX_FRAME:  # bytes, not characters
                return error_("frame_too_large")
            text = body
        try:
            value = json.loads(text, parse_constant=not_json, parse_int=short_int, parse_float=short_finite_float)
            if depth_of(value) > MAX_FRAME_DEPTH:
                return error_("invalid_json")
        except (ValueError, RecursionError):
            return error_("invalid_json")
        return self.expect_value(value)

    def expect_value(self, value: Any) -> Expect:
        if not isinstance(value, dict) or has_lone_surrogate(value):
            return error_("invalid_event")
        kind = value.get("kind")
        envelope_ok = (
            good_uuid(value.get("id"))
            and good_timestamp(value.get("timestamp"))
            and isinstance(kind, dict)
            and (value.get("seq") is None or strict_int(value.get("seq")))
        )
        if not envelope_ok or len(kind) != 1:
            return error_("invalid_event")
        ((name, payload),) = kind.items()
        if name not in KIND_FIELDS:
            return NOTHING  # clients (and the conductor) ignore kinds they do not know
        if not isinstance(payload, dict) or not all(spec.accepts(payload) for spec in KIND_FIELDS[name]):
            return error_("invalid_event")
        return self.expect_event(str(uuid.UUID(value["id"])), name, payload)

    def _claim(self, event_id: str) -> bool:
        """False for an id already processed (a duplicate: no effect, no reply)."""
        if event_id in self.claimed:
            return False
        self.claimed = [*self.claimed[-(event_ids.REMEMBERED - 1) :], event_id]  # the session's memory
        return True

    def expect_event(self, event_id: str, name: str, payload: dict[str, Any]) -> Expect:
        if name == "userAudioTranscriptFinal":
            if len(payload["text"]) > MAX_TRANSCRIPT:
                return error_("transcript_too_long")
            if not self._claim(event_id):
                return DUPLICATE
            if not payload["text"].strip():
                return error_("empty_transcript")
            self.turn_open = True
            return TURN
        if name == "toolResult":
            return error_("no_pending_tool_call") if self._claim(event_id) else DUPLICATE
        if name == "sessionStart":
            if not self._claim(event_id):
                return DUPLICATE
            if payload["sessionId"].lower() != self.session_id:
                return error_("invalid_event")
            return Expect("no_error", replay=payload.get("lastSeq") is not None)
        if name == "error" and payload["code"] == INTERRUPTED:
            if not self._claim(event_id):
                return DUPLICATE
            replies = (IDLE,) if self.turn_open else ()
            self.turn_open = False
            return Expect("no_error", replies=replies)
        return NOTHING  # partials, the server's own kinds, other client errors: nothing to do


# ---- running frames against the oracle ---------------------------------------------------------


@dataclass
class Fuzzer:
    conductor: Harness
    conn: Connection
    oracle: Oracle
    bedrock: RoutingResponder
    outcomes: dict[str, int] = field(default_factory=dict)
    received: dict[int, Event] = field(default_factory=dict)  # by seq: what the app has seen

    def check(self, body: str | None, *, is_base64: bool = False) -> None:
        expected = self.oracle.expect(body, is_base64=is_base64)
        before = frame_count(self.conductor, self.conn)
        response = self.conductor.send_raw(self.conn, body, is_base64=is_base64)
        everything = events_since(self.conductor, self.conn, before)
        shown = (body or "")[:300]
        assert response == OK, f"handler returned {response} for {shown!r}"
        # events re-sent by a replay carry seqs the app has seen; they must be those very events
        replayed = [e for e in everything if e.seq is not None and e.seq in self.received]
        replies = [e for e in everything if e.seq is None or e.seq not in self.received]
        assert len(seqs(replies)) == len(set(seqs(replies))), f"an event posted twice: {summarize(replies)}"
        assert not replayed or expected.replay, f"unexpected replay {summarize(replayed)} for {shown!r}"
        assert all(e == self.received[e.seq] for e in replayed if e.seq is not None)
        assert [e.seq for e in replayed] == sorted(e.seq for e in replayed if e.seq is not None)
        self.received.update((e.seq, e) for e in replies if e.seq is not None)
        got = errors(replies)
        if expected.outcome == "error":
            assert got == [expected.code], f"expected {expected.code}, got {summarize(replies)} for {shown!r}"
        elif expected.outcome == "nothing":
            assert replies == [], f"expected no reply, got {summarize(replies)} for {shown!r}"
        elif expected.outcome == "turn":
            assert got == [] and summarize(replies)[:1] == [THINKING], f"no turn: {summarize(replies)} for {shown!r}"
        else:
            assert got == [], f"unexpected error {got} for {shown!r}"
            if expected.replies is not None:
                assert tuple(summarize(replies)) == expected.replies, f"{summarize(replies)} for {shown!r}"
        key = expected.label or expected.code or expected.outcome
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        count("fuzz: examples run")
        if sum(self.outcomes.values()) % 200 == 0:
            release_moto_copies()

    def finish(self, name: str) -> None:
        """The same session then completes a normal turn, and its history is valid."""
        for outcome, number in sorted(self.outcomes.items()):
            count(f"fuzz: outcome {outcome}", number)
        total = sum(self.outcomes.values())
        print(f"fuzz: {name}: {total} examples run, outcomes {dict(sorted(self.outcomes.items()))}")
        before = frame_count(self.conductor, self.conn)
        self.conductor.say(self.conn, "after all that, say something normal")
        replies = events_since(self.conductor, self.conn, before)
        assert summarize(non_partial(replies)) == [
            THINKING,
            ("final", "Okay."),
            ("toolCall", "tts.speak", {"text": "Okay."}),
        ]
        self.conductor.finish_turn(self.conn)
        assert self.conductor.summary(self.conn)[-1] == IDLE
        history = self.conductor.history(self.conn.session_id)
        assert_valid_history(history)
        assert history[-1] == {"role": "assistant", "content": [{"text": "Okay."}]}


FOREIGN_CALL_ID = "foreign-call-0001"
FOREIGN_USE = tool_call("editor.openFile", {"path": "theirs.swift"}, call_id=FOREIGN_CALL_ID)


def fuzz_route(request: dict[str, Any]) -> Any:
    if any("open theirs" in text for text in request_texts(request)):  # the other session
        return message("Theirs is open.") if answers_tools(request) else message(FOREIGN_USE)
    return message("Okay.")


@pytest.fixture
def fuzzer(
    conductor: Harness,
    route: Callable[[Callable[[dict[str, Any]], Any]], RoutingResponder],
    monkeypatch: pytest.MonkeyPatch,
) -> Fuzzer:
    monkeypatch.setenv("CONDUCTOR_MAX_TURNS_PER_MINUTE", "1000000")  # rate_limited has its own test
    runtime.reset()
    bedrock = route(fuzz_route)
    conn = conductor.connect()
    return Fuzzer(conductor, conn, Oracle(conn.session_id.lower()), bedrock)


# ---- strategies --------------------------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=16)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)
not_a_string = json_values.filter(lambda v: not isinstance(v, str))
not_a_string_or_null = json_values.filter(lambda v: v is not None and not isinstance(v, str))
not_an_int = json_values.filter(lambda v: v is not None and not strict_int(v))

uuids = st.uuids().map(str)
uuid_spellings = st.tuples(st.uuids(), st.sampled_from(["str", "upper", "hex", "braces", "urn"])).map(
    lambda pair: {
        "str": str(pair[0]),
        "upper": str(pair[0]).upper(),
        "hex": pair[0].hex,
        "braces": "{" + str(pair[0]) + "}",
        "urn": pair[0].urn,
    }[pair[1]]
)
millisecond_timestamps = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 12, 31)).map(
    lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"
)  # JavaScript's toISOString, the conductor's own
timestamps = st.one_of(
    millisecond_timestamps,
    millisecond_timestamps.map(lambda ts: ts[:19] + "Z"),  # Swift's JSONEncoder .iso8601
    st.tuples(
        millisecond_timestamps,
        st.text(alphabet="0123456789", max_size=9),
        st.sampled_from(["Z", "z", "+00:00", "-00:00", "+05:30", "-08:00", "+23:59", "-23:59"]),
        st.sampled_from("Tt"),
    ).map(lambda p: p[0][:10] + p[3] + p[0][11:19] + (f".{p[1]}" if p[1] else "") + p[2]),
    st.sampled_from(["2016-12-31T23:59:60Z", "2017-01-01T08:59:60.5+09:00", "0000-02-29T00:00:00Z"]),
)
bad_ids = st.one_of(
    not_a_string,
    st.text(max_size=60).filter(lambda s: not good_uuid(s) and "\\u" not in s),
    uuids.map(lambda u: u[:-1]),
    uuids.map(lambda u: u + "0"),
    uuids.map(lambda u: " " + u),
    uuids.map(lambda u: u + "\n"),
    uuids.map(lambda u: u.replace("-", "_")),
    uuids.map(lambda u: u[:8] + "g" + u[9:]),
    st.just(""),
)
near_miss_timestamps = millisecond_timestamps.flatmap(
    lambda ts: st.sampled_from(
        [
            ts[:-1],  # no offset
            ts.replace("T", " "),
            ts[:-1] + "+0000",
            ts[:-1] + "+24:00",
            ts[:19] + ".Z",  # a dot without digits
            ts[:19] + ".1234567890Z",  # more than 9 fraction digits
            ts + "\n",
            " " + ts,
            ts[:5] + "13" + ts[7:],  # month 13
            ts[:11] + "25" + ts[13:],  # hour 25
            ts[:8] + "32" + ts[10:],  # day 32
            ts[:17] + "60Z",  # second 60 that is no leap second (unless ts is a month's 23:59)
            "2025-02-30T10:30:00.000Z",
            "2023-02-29T10:30:00Z",
            "2016-12-31T23:59:60+01:00",
        ]
    )
)
FULLWIDTH = str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10)))
ARABIC_INDIC = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")
bad_timestamps = st.one_of(
    not_a_string,
    near_miss_timestamps,
    millisecond_timestamps.map(lambda ts: ts[:4].translate(ARABIC_INDIC) + ts[4:]),  # digits, but not ASCII ones
    millisecond_timestamps.map(lambda ts: ts.translate(FULLWIDTH)),
    st.text(max_size=40).filter(lambda s: not good_timestamp(s)),
)
unknown_kinds = st.text(min_size=1, max_size=40).filter(lambda name: name not in KIND_FIELDS)


@dataclass(frozen=True)
class Pools:
    """Values that matter for one session: its id, another session's pending call."""

    session_id: str
    foreign_call_id: str


def string_value(spec: FieldSpec, kind: str, pools: Pools) -> st.SearchStrategy[str]:
    low, high = spec.min_len or 0, spec.max_len or 200
    plain = st.text(min_size=low, max_size=min(high, 60))
    if spec.name == "sessionId":
        return st.one_of(
            st.sampled_from([pools.session_id, pools.session_id.upper()]),
            uuids,
            plain,
            st.just("x" * 128),
        )
    if spec.name == "callId":
        return st.one_of(plain, st.just(pools.foreign_call_id), st.just("c" * 256), uuids)
    if spec.name == "code" and kind == "error":
        return st.one_of(st.just(INTERRUPTED), st.sampled_from(["tts_failed", "ws_error", "decode_error"]), plain)
    if spec.name == "text" and kind == "userAudioTranscriptFinal":
        return st.one_of(
            st.text(min_size=1, max_size=80),
            st.sampled_from(["open main.swift", "run the tests", "what does this function do?"]),
            st.text(alphabet=" \t\n\r\u00a0\u2003\u3000", max_size=10),  # blank
            st.just("y" * MAX_TRANSCRIPT),  # at the limit: a turn
            st.integers(1, 100_000).map(lambda n: "z" * (MAX_TRANSCRIPT + n)),  # over it
        )
    return st.text(max_size=high if spec.max_len else 80)


MISSING = object()


def field_values(spec: FieldSpec, kind: str, pools: Pools) -> st.SearchStrategy[Any]:
    """A value for one field: right (most often: the handlers behind the parser get exercised too),
    of a wrong type, of a wrong length or sign, null, or MISSING."""
    wrong: list[st.SearchStrategy[Any]] = [st.just(MISSING)]
    if spec.type == "int":
        right: st.SearchStrategy[Any] = st.one_of(
            st.integers(min_value=1_000_000, max_value=2**63), st.just(0)
        )  # 0 replays everything kept
        wrong += [st.integers(max_value=-1), not_an_int, st.just(True)]
    else:
        right = string_value(spec, kind, pools)
        wrong.append(not_a_string_or_null if spec.nullable else not_a_string)
        if spec.min_len:
            wrong.append(st.just(""))
        if spec.max_len:
            wrong.append(st.integers(1, 40).map(lambda n, m=spec.max_len: "w" * (m + n)))
    if spec.nullable:
        right = right | st.none()
    return st.integers(0, 9).flatmap(lambda n: right if n < 7 else st.one_of(wrong))


@st.composite
def payloads(draw: st.DrawFn, kind: str, pools: Pools) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    for spec in KIND_FIELDS[kind]:
        value = draw(field_values(spec, kind, pools))
        if value is not MISSING:
            payload[spec.name] = value
    if draw(st.integers(0, 9)) == 0:  # unknown extra fields are ignored
        payload[draw(st.text(max_size=10).filter(lambda k: k not in payload))] = draw(json_values)
    return payload


@st.composite
def events_of_every_kind(draw: st.DrawFn, pools: Pools) -> dict[str, Any]:
    kind = draw(unknown_kinds) if draw(st.integers(0, 9)) == 0 else draw(st.sampled_from(sorted(KIND_FIELDS)))
    payload = draw(payloads(kind, pools)) if kind in KIND_FIELDS else draw(json_values)
    if kind in KIND_FIELDS and draw(st.integers(0, 19)) == 0:
        payload = draw(json_values.filter(lambda v: not isinstance(v, dict)))  # the kind's body is no object
    # hypothesis re-draws the same UUIDs often (good: duplicates are exercised); most ids are fresh
    event_id = draw(uuid_spellings) if draw(st.integers(0, 9)) < 3 else str(uuid.uuid4())
    return {"id": event_id, "timestamp": draw(timestamps), "kind": {kind: payload}}


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """Envelopes with each member right, wrong or missing; kinds cheap to handle when all is right."""
    event: dict[str, Any] = {}
    for member, good, bad in (
        ("id", uuid_spellings, bad_ids),
        ("timestamp", timestamps, bad_timestamps),
        (
            "kind",
            st.one_of(
                st.just({"userAudioTranscriptPartial": {"text": "hel"}}),
                st.just({"assistantSpeechFinal": {"text": "I said this"}}),
                st.builds(lambda name, body: {name: body}, unknown_kinds, json_values),
            ),
            st.one_of(
                st.just({}),
                st.dictionaries(st.text(max_size=20), json_values, min_size=2, max_size=4),
                json_values.filter(lambda v: not isinstance(v, dict)),
            ),
        ),
        ("seq", st.one_of(st.none(), st.integers()), not_an_int),
    ):
        choice = draw(st.integers(0, 9))
        if choice < 6:
            event[member] = draw(good)
        elif choice < 9:
            event[member] = draw(bad)
        # else: the member is missing
    if draw(st.booleans()):
        event[draw(st.text(max_size=10).filter(lambda k: k not in event))] = draw(json_values)
    return event


def deep(n: int, kind: str) -> str:
    return "[" * n + "]" * n if kind == "list" else '{"a":' * n + "1" + "}" * n


def envelope_text(inner: str, kind_name: str = "toolResult") -> str:
    return (
        f'{{"id":"{uuid.uuid4()}","timestamp":"2025-01-15T10:30:00.000Z",'
        f'"kind":{{"{kind_name}":{{"callId":"x","extra":{inner}}}}}}}'
    )


def surrogate_frame(where: str, code_point: int) -> str:
    escape = f"\\u{code_point:04x}"
    text = escape if where == "text" else "fine"
    call_id = escape if where == "callId" else "c1"
    kind = f"userGesture{escape}" if where == "kind" else "toolResult"
    key = f"x{escape}" if where == "key" else "x"
    return (
        f'{{"id":"{uuid.uuid4()}","timestamp":"2025-01-15T10:30:00.000Z","{key}":1,'
        f'"kind":{{"{kind}":{{"callId":"{call_id}","result":"{text}"}}}}}}'
    )


def exact_frame(size: int) -> str:
    """A well-formed partial transcript frame of exactly ``size`` bytes (ASCII)."""
    padding = size - len(frame("userAudioTranscriptPartial", {"text": ""}))
    return frame("userAudioTranscriptPartial", {"text": "x" * padding})


def multibyte_frame(size: int, char: str) -> str:
    """A well-formed partial transcript frame of about ``size`` UTF-8 bytes, made of ``char``."""
    empty = len(frame("userAudioTranscriptPartial", {"text": ""}))
    count = (size - empty) // len(char.encode("utf-8"))
    event = json.loads(frame("userAudioTranscriptPartial", {"text": ""}))
    event["kind"]["userAudioTranscriptPartial"]["text"] = char * count
    return json.dumps(event, ensure_ascii=False)


raw_frames = st.one_of(
    # (body, is_base64)
    st.binary(max_size=300).map(lambda b: (base64.b64encode(b).decode(), True)),
    st.binary(min_size=1, max_size=300)
    .map(lambda b: b + b"\xff\xfe" + b)
    .map(lambda b: (base64.b64encode(b).decode(), True)),  # never UTF-8
    st.text(alphabet="ABCDabcd0123+/=!@# \n", min_size=1, max_size=60).map(lambda s: (s, True)),
    st.text(max_size=300).map(lambda s: (s, False)),
    st.text(alphabet='{}[]":,0123456789.eE+-tfrunl \\', max_size=120).map(lambda s: (s, False)),
    json_values.map(lambda v: (json.dumps(v), False)),
    st.tuples(st.integers(10_000, 40_000), st.sampled_from(["list", "dict"])).map(lambda p: (deep(p[0], p[1]), False)),
    st.tuples(st.integers(10_000, 20_000), st.sampled_from(["list", "dict"])).map(
        lambda p: (envelope_text(deep(p[0], p[1])), False)
    ),
    st.integers(1, 60).map(lambda depth: (envelope_text(deep(depth, "list")), False)),  # shallow: fine
    st.integers(10_000, 40_000).map(lambda n: (base64.b64encode(deep(n, "list").encode()).decode(), True)),
    st.integers(1, 30_000).map(lambda n: (json.dumps([1] * n), False)),  # huge, not an object
    st.integers(1_000, 28_000).map(
        lambda n: (
            json.dumps({**json.loads(frame("userAudioTranscriptPartial", {"text": "p"})), "pad": [7] * n}),
            False,
        )
    ),  # huge, well-formed, under the limit
    st.integers(1, 50_000).map(lambda n: ("q" * (MAX_FRAME + n), False)),
    st.integers(1, 50_000).map(lambda n: (base64.b64encode(b"{" * (MAX_FRAME + 8 + n)).decode(), True)),
    st.integers(1, 20_000).map(lambda n: (frame("userAudioTranscriptPartial", {"text": "t" * (MAX_FRAME + n)}), False)),
    st.sampled_from([("", False), ("", True), ("null", False), ("{}", False), ("[]", False), ('"x"', False)]),
    st.just((None, False)),
    st.just(("9" * 5000, False)),  # more digits than Python's int parser accepts
    st.tuples(st.sampled_from(["text", "callId", "kind", "key"]), st.integers(0xD800, 0xDFFF)).map(
        lambda p: (surrogate_frame(*p), False)
    ),  # valid JSON, not Unicode text
    st.tuples(st.integers(-40, 40), st.sampled_from(["\u00e9", "\u20ac", "\U0001f600"])).map(
        lambda p: (multibyte_frame(MAX_FRAME + p[0], p[1]), False)
    ),  # around the limit in bytes, well under it in characters
    st.integers(-6, 6).map(lambda d: (base64.b64encode(exact_frame(MAX_FRAME + d).encode()).decode(), True)),
)


# ---- the tests ---------------------------------------------------------------------------------


def test_fuzz_raw_frames(fuzzer: Fuzzer) -> None:
    @fuzz_settings(4000)
    @given(raw_frames)
    def run(case: tuple[str | None, bool]) -> None:
        body, is_base64 = case
        fuzzer.check(body, is_base64=is_base64)

    run()
    fuzzer.finish("raw frames")


def test_fuzz_envelopes(fuzzer: Fuzzer) -> None:
    @fuzz_settings(4000)
    @given(envelopes())
    def run(event: dict[str, Any]) -> None:
        fuzzer.check(json.dumps(event))

    run()
    fuzzer.finish("envelopes")


def test_fuzz_every_kind_with_wrong_fields(fuzzer: Fuzzer) -> None:
    conductor = fuzzer.conductor
    other = conductor.connect()  # another session, with a model call pending
    conductor.say(other, "open theirs")
    assert [e.payload.call_id for e in model_calls(conductor.events(other))] == [FOREIGN_CALL_ID]
    pools = Pools(session_id=fuzzer.conn.session_id, foreign_call_id=FOREIGN_CALL_ID)

    @fuzz_settings(2200)
    @given(events_of_every_kind(pools))
    def run(event: dict[str, Any]) -> None:
        fuzzer.check(json.dumps(event))

    run()
    fuzzer.finish("every kind, wrong fields")
    # this session's results never touched the other session's call: it is still pending
    assert errors(conductor.events(other)) == []
    conductor.answer(other, FOREIGN_CALL_ID, '{"opened":true}')
    assert ("final", "Theirs is open.") in conductor.summary(other)
