"""What Bedrock really sends, through the handlers: stop reasons, cut streams, server tools,
context overflow, big tool results and the protocol's own tools in the catalog."""

from __future__ import annotations

import json

import pytest

from conductor_local.bedrock.server import (
    ToolUse,
    block_stop,
    message,
    message_start,
    message_stop,
    metadata,
    text_delta,
    tool_call,
    tool_input_delta,
    validation_error,
)
from lambdas import runtime
from shared.core.failure_lines import FAILURE_LINES, FailureCause
from shared.core.messages import is_plain_user_message
from shared.core.stream import CONTEXT_FULL_LINE, CUT_OFF_LINE, FILTERED_LINE
from tests.handlers.conftest import Harness, summarize

TOO_LONG = "Input is too long for requested model."
# Every wording in which Bedrock refuses a request over the model's context window.
OVERFLOW_WORDINGS = [
    TOO_LONG,
    "The model returned the following errors: prompt is too long: 200049 tokens > 200000 maximum",
    "The model returned the following errors: input length and `max_tokens` exceed context limit: 196395 + 64000 "
    "> 204698, decrease input length or `max_tokens` and try again",
    "The model returned the following errors: too many total text bytes: 9000412 > 9000000",
]


def spoken(harness: Harness, conn: object) -> list[str]:
    return [
        json.loads(e.payload.arguments)["text"]
        for e in harness.events(conn)  # type: ignore[arg-type]
        if e.kind_name == "toolCall" and e.payload.name == "tts.speak"
    ]


def tool_calls(harness: Harness, conn: object) -> list[str]:
    return [
        e.payload.name
        for e in harness.events(conn)  # type: ignore[arg-type]
        if e.kind_name == "toolCall" and not e.payload.call_id.startswith("conductor-")
    ]


def test_max_tokens_with_a_cut_off_tool_input_asks_the_model_once(conductor: Harness) -> None:
    cut = ToolUse("tool_call", '{"name": "editor.readFile", "argum')
    conductor.script.push(message("Let me read it.", cut, stop_reason="max_tokens"))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "read a.swift")
    assert len(conductor.script.requests) == 1
    assert tool_calls(conductor, conn) == []
    assert ("error", "invalid_tool_call") not in conductor.summary(conn)
    assert spoken(conductor, conn) == ["Let me read it.", CUT_OFF_LINE]


def test_max_tokens_cut_text_trails_off_and_the_line_is_a_paragraph_of_its_own(conductor: Harness) -> None:
    conductor.script.push(message("Qubits are", stop_reason="max_tokens"))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "explain qubits")
    finals = [text for kind, text, *_ in conductor.summary(conn) if kind == "final"]
    assert finals == [f"Qubits are…\n\n{CUT_OFF_LINE}"]
    assert spoken(conductor, conn) == [f"Qubits are… {CUT_OFF_LINE}"]


def test_content_filtered_is_a_spoken_line_not_silence(conductor: Harness) -> None:
    conductor.script.push(message("Here is how to", stop_reason="content_filtered"))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "something")
    assert spoken(conductor, conn) == [FILTERED_LINE]
    conductor.finish_turn(conn)
    assert summarize(conductor.events(conn))[-1] == ("toolCall", "convo.setState", {"state": "idle"})


def test_context_window_exceeded_after_text_keeps_it_and_sends_fewer_messages_next(conductor: Harness) -> None:
    conductor.script.push(message("First answer."), message("Second answer."))
    conductor.script.push(message("Partly said", stop_reason="model_context_window_exceeded"), message("Short now."))
    conn = conductor.connect()
    conductor.start_session(conn)
    for text in ("one", "two", "three"):
        conductor.say(conn, text)
        conductor.finish_turn(conn)
    assert spoken(conductor, conn)[-1] == f"Partly said… {CONTEXT_FULL_LINE}"  # the note is a sentence of its own
    conductor.say(conn, "four")
    sent = [len(request.body["messages"]) for request in conductor.script.requests]
    assert sent[-1] < sent[-2] + 2  # the window shrank instead of growing by the new exchange


def test_a_stream_without_message_stop_is_a_model_error(conductor: Harness) -> None:
    conductor.script.push([message_start(), text_delta(0, "Half an"), text_delta(0, " answer")], message("Fine again."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "hello")
    assert ("error", "bedrock_error") in conductor.summary(conn)
    assert conductor.history(conn.session_id)[-1]["content"][0]["text"].startswith("Half an answer")
    conductor.say(conn, "again")
    assert ("final", "Fine again.") in conductor.summary(conn)


def test_a_server_tool_use_never_reaches_the_app(conductor: Harness) -> None:
    server_use = {
        "contentBlockStart": {
            "start": {"toolUse": {"toolUseId": "srv_1", "name": "web_search", "type": "server_tool_use"}},
            "contentBlockIndex": 0,
        }
    }
    steps = [
        message_start(),
        server_use,
        tool_input_delta(0, '{"query": "swift"}'),
        block_stop(0),
        text_delta(1, "Swift 6 is out."),
        block_stop(1),
        message_stop("end_turn"),
        metadata(10, 5),
    ]
    conductor.script.push(steps)
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "news?")
    assert tool_calls(conductor, conn) == []
    assert spoken(conductor, conn) == ["Swift 6 is out."]


@pytest.mark.parametrize("wording", OVERFLOW_WORDINGS)
def test_overflow_shrinks_the_window_and_the_next_turn_starts_from_it(conductor: Harness, wording: str) -> None:
    conn = conductor.connect()
    conductor.start_session(conn)
    for index in range(4):
        conductor.script.push(message(f"Answer {index}."))
        conductor.say(conn, f"question {index}")
        conductor.finish_turn(conn)
    conductor.script.push(validation_error(wording), message("Fits now."), message("Still fits."))
    conductor.say(conn, "question 4")
    refused, retried = conductor.script.requests[-2:]
    assert len(retried.body["messages"]) < len(refused.body["messages"])
    assert is_plain_user_message(retried.body["messages"][0])
    assert ("final", "Fits now.") in conductor.summary(conn)
    conductor.finish_turn(conn)
    conductor.say(conn, "question 5")
    latest = conductor.script.requests[-1].body["messages"]
    assert len(latest) <= len(retried.body["messages"]) + 2
    assert ("final", "Still fits.") in conductor.summary(conn)


def test_overflow_of_the_last_message_alone_fails_the_turn_and_the_next_one_works(conductor: Harness) -> None:
    conductor.script.push(validation_error(TOO_LONG), message("Hello again."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "a very long question")
    line = FAILURE_LINES[FailureCause.TOO_LONG]
    assert conductor.summary(conn)[-2:] == [
        ("error", "bedrock_error"),
        ("toolCall", "tts.speak", {"text": line}),
    ]
    conductor.finish_turn(conn)
    assert summarize(conductor.events(conn))[-1] == ("toolCall", "convo.setState", {"state": "idle"})
    conductor.say(conn, "short")
    assert ("final", "Hello again.") in conductor.summary(conn)


@pytest.mark.parametrize(("cap", "env"), [(16_000, None), (500, "500")])
def test_a_big_tool_result_reaches_the_model_capped(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, cap: int, env: str | None
) -> None:
    if env is not None:
        monkeypatch.setenv("CONDUCTOR_MAX_TOOL_RESULT_CHARS", env)
        runtime.reset()
    use = tool_call("editor.readFile", {"path": "Big.swift"})
    conductor.script.push(message(use), message("Read it."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "read Big.swift")
    content = "x" * 40_000
    conductor.answer(conn, conductor.call_id(conn, "editor.readFile"), content)
    results = [
        block["toolResult"]
        for block in conductor.script.requests[-1].body["messages"][-1]["content"]
        if "toolResult" in block
    ]
    text = results[0]["content"][0]["text"]
    assert text.startswith("x" * cap) and not text.startswith("x" * (cap + 1))
    assert "40,000 characters" in text and f"first {cap:,}" in text
    stored = conductor.history(conn.session_id)[-2]["content"][0]["toolResult"]["content"][0]["text"]
    assert stored == text  # what the model saw is what is kept


def test_the_model_may_speak_through_the_protocols_own_tool(conductor: Harness) -> None:
    use = tool_call("tts.speak", {"text": "One moment."})
    conductor.script.push(message(use), message("Done."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "wait")
    assert tool_calls(conductor, conn) == ["tts.speak"]
    assert ("error", "invalid_tool_call") not in conductor.summary(conn)
