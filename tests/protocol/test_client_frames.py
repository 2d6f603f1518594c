"""Frames exactly as real clients write them (``fixtures/``, see ``client_writers``) are accepted:
each parses to its payload, and a whole session of them goes through the message handler
without a single ``invalid_event``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conductor_local.bedrock.server import message
from shared.wire.payload import WirePayload
from shared.wire.protocol import (
    ErrorPayload,
    Event,
    SessionStart,
    ToolResult,
    UserAudioTranscriptFinal,
    UserAudioTranscriptPartial,
    parse_event,
)
from tests.handlers.conftest import Harness, summarize
from tests.protocol.client_writers import JAVASCRIPT_WRITER, SWIFT_WRITERS, WRITERS, swift_json

FIXTURES = Path(__file__).resolve().parent / "fixtures"
JS_SCRIPT = FIXTURES / JAVASCRIPT_WRITER / "write-events.mjs"

#: the sessionId each client's fixtures carry (Swift: ``UUID().uuidString``, upper case)
SESSION_IDS = {
    "swift-iso8601": "E621E1F8-C36C-495A-93FC-0C247A3E6E5F",
    "swift-iso8601-sorted-keys": "9B2D4F6A-1C3E-4A5B-8D7F-0E1F2A3B4C5D",
    "swift-iso8601-without-escaping-slashes": "3F2504E0-4F89-41D3-9A0C-0305E82C3301",
    JAVASCRIPT_WRITER: "6ba7b810-9dad-41d1-80b4-00c04fd430c8",
}
RESULT = '{"path":"Sources/App/main.swift","preview":"import SwiftUI\\n"}'
FINAL_TEXT = 'open Sources/App/main.swift and say "café" 👋'


def expected_payload(writer: str, case: str) -> WirePayload:
    session_id = SESSION_IDS[writer]
    return {
        "sessionStart": SessionStart(sessionId=session_id),
        "sessionStart-lastSeq": SessionStart(sessionId=session_id, lastSeq=12),
        "userAudioTranscriptPartial": UserAudioTranscriptPartial(text="open Sources/Ap"),
        "userAudioTranscriptFinal": UserAudioTranscriptFinal(text=FINAL_TEXT),
        "toolResult-result": ToolResult(callId="tooluse_Q2FsbC1yZXN1bHQ", result=RESULT),
        "toolResult-error": ToolResult(
            callId="tooluse_Q2FsbC1lcnJvcg", error="file not found:\nSources/App/Missing.swift"
        ),
        "error-interrupted": ErrorPayload(code="audio.output.interrupted", message="the user started speaking"),
    }[case]


CASES = [
    "sessionStart",
    "sessionStart-lastSeq",
    "userAudioTranscriptPartial",
    "userAudioTranscriptFinal",
    "toolResult-result",
    "toolResult-error",
    "error-interrupted",
]
KIND_OF_CASE = {case: case.split("-", 1)[0] for case in CASES}


def fixture(writer: str, case: str) -> bytes:
    return (FIXTURES / writer / f"{case}.json").read_bytes()


def test_every_writer_has_every_client_kind() -> None:
    for writer in WRITERS:
        assert sorted(p.stem for p in (FIXTURES / writer).glob("*.json")) == sorted(CASES), writer


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("writer", sorted(SWIFT_WRITERS))
def test_swift_fixtures_are_what_json_encoder_writes(writer: str, case: str) -> None:
    raw = fixture(writer, case)
    decoded = json.loads(raw)
    assert raw == swift_json(decoded, **SWIFT_WRITERS[writer]), "not byte for byte what JSONEncoder writes"
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", decoded["timestamp"])  # .iso8601
    assert decoded["id"] == decoded["id"].upper()  # UUID().uuidString
    assert "null" not in raw.decode()  # nil optionals are left out, never written as null
    if SWIFT_WRITERS[writer]["escape_slashes"] and "/" in json.dumps(decoded, ensure_ascii=False):
        assert b"\\/" in raw and b"/" not in raw.replace(b"\\/", b"")


def test_javascript_fixtures_are_what_json_stringify_writes() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JavaScript fixtures cannot be re-written")
    written = subprocess.run([node, str(JS_SCRIPT)], capture_output=True, text=True, check=True, timeout=60).stdout
    frames = dict(line.split("\t", 1) for line in written.splitlines())
    assert sorted(frames) == sorted(CASES)
    for case, frame in frames.items():
        assert fixture(JAVASCRIPT_WRITER, case) == frame.encode("utf-8"), case
        assert re.fullmatch(r"\S+T\S+\.[0-9]{3}Z", json.loads(frame)["timestamp"])  # toISOString


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("writer", WRITERS)
def test_client_frames_parse_to_their_payload(writer: str, case: str) -> None:
    raw = fixture(writer, case)
    for frame in (raw, raw.decode("utf-8")):  # API Gateway hands the handler text; bytes parse the same
        parsed = parse_event(frame)
        assert isinstance(parsed, Event), parsed
        decoded = json.loads(raw)
        assert parsed.kind_name == KIND_OF_CASE[case]
        assert parsed.payload == expected_payload(writer, case)
        assert parsed.id == uuid.UUID(decoded["id"]) and str(parsed.id) == decoded["id"].lower()
        assert parsed.timestamp == decoded["timestamp"]  # kept as the client wrote it
        assert parse_event(parsed.to_json()) == parsed


@pytest.mark.parametrize("writer", WRITERS)
def test_a_client_session_goes_through_the_handler_without_invalid_event(conductor: Harness, writer: str) -> None:
    """The app connects with its sessionId as it has it (upper case from Swift) and sends each of
    its frames: the sessionStart is this session's, the transcript starts a turn, the barge-in ends it."""
    conductor.script.push(message("Opening it now."))
    conn = conductor.connect(SESSION_IDS[writer])
    assert conn.status == 200
    replies: dict[str, list[tuple[object, ...]]] = {}
    for case in CASES:
        before = len(conductor.events(conn))
        assert conductor.send_raw(conn, fixture(writer, case).decode("utf-8")) == {"statusCode": 200}
        replies[case] = summarize(conductor.events(conn)[before:])
    errors = {case: [r for r in got if r[0] == "error"] for case, got in replies.items()}
    assert errors == {
        "sessionStart": [],
        "sessionStart-lastSeq": [],
        "userAudioTranscriptPartial": [],
        "userAudioTranscriptFinal": [],
        # real payloads, answering calls this session never made: refused for that, not as malformed
        "toolResult-result": [("error", "no_pending_tool_call")],
        "toolResult-error": [("error", "no_pending_tool_call")],
        "error-interrupted": [],
    }
    assert replies["userAudioTranscriptFinal"][0] == ("toolCall", "convo.setState", {"state": "thinking"})
    assert ("final", "Opening it now.") in replies["userAudioTranscriptFinal"]
    assert replies["error-interrupted"] == [("toolCall", "convo.setState", {"state": "idle"})]
