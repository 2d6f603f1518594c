"""A thinking model's reasoning blocks: never spoken, kept in the history, sent back unmodified.

Claude models with (adaptive) thinking stream ``reasoningContent`` deltas; after tool results the
model needs its reasoning back, text and signature unmodified, or Bedrock refuses the request.
Amazon Nova writes its reasoning into the text instead, as ``<thinking>…</thinking>``: never shown
nor spoken either, and kept in the history as the model wrote it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from conductor_local.bedrock.server import (
    Step,
    Text,
    block_stop,
    message,
    message_start,
    message_stop,
    metadata,
    tool_call,
)
from lambdas import runtime
from tests.handlers.conftest import Harness

REASONING = "The user wants the file opened; I will call the tool."
SIGNATURE = "EqoBCkgIARABGAIiQL0signature"
REDACTED = b"\x00\x01encrypted-by-the-provider\xff"


def reasoning_delta(index: int, **fields: Any) -> dict[str, Any]:
    return {"contentBlockDelta": {"delta": {"reasoningContent": fields}, "contentBlockIndex": index}}


def thinking_then(*rest: Step, redacted: bool = False) -> list[Step]:
    """A message that starts with a reasoning block (streamed in two pieces plus its signature)."""
    steps: list[Step] = [message_start()]
    if redacted:
        steps.append(reasoning_delta(0, redactedContent=base64.b64encode(REDACTED).decode()))
    else:
        steps += [
            reasoning_delta(0, text=REASONING[:20]),
            reasoning_delta(0, text=REASONING[20:]),
            reasoning_delta(0, signature=SIGNATURE),
        ]
    steps.append(block_stop(0))
    return [*steps, *rest]


def shifted(steps: list[Step], by: int) -> list[Step]:
    """The content events of a scripted message with their block indexes moved by ``by``."""
    moved: list[Step] = []
    for step in steps:
        if isinstance(step, dict):
            kind = next(iter(step))
            if kind in ("messageStart", "messageStop", "metadata"):
                continue
            body = dict(step[kind])
            body["contentBlockIndex"] = body["contentBlockIndex"] + by
            step = {kind: body}
        moved.append(step)
    return moved


def test_reasoning_is_not_spoken_and_goes_back_to_the_model_after_tool_results(conductor: Harness) -> None:
    use = tool_call("editor.openFile", {"path": "main.swift"})
    first = thinking_then(*shifted(message("Opening it.", use), 1), message_stop("tool_use"), metadata(10, 5))
    conductor.script.push(first, message("Done."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "open main.swift")
    spoken = [e.payload.text for e in conductor.events(conn) if e.kind_name == "assistantSpeechFinal"]
    assert spoken == ["Opening it."]
    assert all(REASONING[:10] not in json.dumps(e.to_wire()) for e in conductor.events(conn))

    conductor.answer(conn, conductor.call_id(conn, "editor.openFile"), '{"opened":true}')
    resumed = conductor.script.requests[-1].body["messages"]
    assert resumed[1]["role"] == "assistant"
    assert resumed[1]["content"][0] == {
        "reasoningContent": {"reasoningText": {"text": REASONING, "signature": SIGNATURE}}
    }
    assert [next(iter(block)) for block in resumed[1]["content"]] == ["reasoningContent", "text", "toolUse"]


def test_redacted_reasoning_is_stored_as_text_and_sent_back_as_the_same_bytes(conductor: Harness) -> None:
    use = tool_call("git.status", {})
    first = thinking_then(*shifted(message(use), 1), message_stop("tool_use"), metadata(10, 5), redacted=True)
    conductor.script.push(first, message("Clean."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "status")
    conductor.answer(conn, conductor.call_id(conn, "git.status"), '{"clean":true}')
    sent = conductor.script.requests[-1].body["messages"][1]["content"][0]
    # On the wire a blob is base64: the model gets back exactly the bytes it produced.
    assert base64.b64decode(sent["reasoningContent"]["redactedContent"]) == REDACTED
    stored = conductor.history(conn.session_id)[1]["content"][0]
    assert stored == {"reasoningContent": {"redactedContent": base64.b64encode(REDACTED).decode()}}


# ---- reasoning written inline, as text (Amazon Nova) -------------------------------------------

NOVA = "us.amazon.nova-micro-v1:0"
NOVA_THINKING = "<thinking>The user wants the build run. I should call project.search first.</thinking>"
NOVA_AFTER = "<thinking>The build passed; I will tell the user.</thinking>\n\nThe build passed. No warnings."


@pytest.fixture
def nova(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.setenv("BEDROCK_MODEL_ID", NOVA)
    runtime.reset()
    return conductor


def app_saw(harness: Harness, conn: object) -> tuple[list[str], list[str], list[str]]:
    """The partials, finals and tts.speak texts the app received."""
    partials, finals, speaks = [], [], []
    for event in harness.events(conn):  # type: ignore[arg-type]
        if event.kind_name == "assistantSpeechPartial":
            partials.append(event.payload.text)
        elif event.kind_name == "assistantSpeechFinal":
            finals.append(event.payload.text)
        elif event.kind_name == "toolCall" and event.payload.name == "tts.speak":
            speaks.append(json.loads(event.payload.arguments)["text"])
    return partials, finals, speaks


@pytest.mark.parametrize("sentence_speech", [True, False], ids=["sentence-speech", "one-speak"])
def test_nova_inline_thinking_is_never_shown_nor_spoken_and_the_history_keeps_it(
    nova: Harness, sentence_speech: bool
) -> None:
    """Nova streams its reasoning as text, the tags split across deltas, then its answer and a tool use."""
    first = message(Text(NOVA_THINKING + "I'll run the build.", chars_per_delta=3), tool_call("project.search", {}))
    nova.script.push(first, message(Text(NOVA_AFTER, chars_per_delta=4)))
    conn = nova.connect()
    capabilities = {"capabilities": ["sentenceSpeech"]} if sentence_speech else {}
    nova.send(conn, "sessionStart", {"sessionId": conn.session_id, **capabilities})
    nova.say(conn, "run the build")
    nova.answer(conn, nova.call_id(conn, "project.search"), '{"succeeded":true}')
    assert {request.model_id for request in nova.script.requests} == {NOVA}

    partials, finals, speaks = app_saw(nova, conn)
    assert finals == ["I'll run the build.", "The build passed. No warnings."]
    assert " ".join(speaks) == "I'll run the build. The build passed. No warnings."
    assert partials and all(any(final.startswith(p) for final in finals) for p in partials)
    for text in [*partials, *finals, *speaks]:
        assert "<" not in text and "thinking" not in text and "user" not in text
    stored = [block["text"] for m in nova.history(conn.session_id) for block in m["content"] if "text" in block]
    assert NOVA_THINKING + "I'll run the build." in stored and NOVA_AFTER in stored  # as the model wrote it
    resumed = nova.script.requests[-1].body["messages"]
    assert resumed[1]["content"][0] == {"text": NOVA_THINKING + "I'll run the build."}


def test_nova_message_that_is_only_thinking_and_a_tool_use_shows_its_plan_and_says_nothing(nova: Harness) -> None:
    nova.script.push(
        message(Text(NOVA_THINKING, chars_per_delta=5), tool_call("project.search", {})),
        message("It built."),
    )
    conn = nova.connect()
    nova.start_session(conn)
    nova.say(conn, "run the build")
    events = [e for e in nova.events(conn) if e.kind_name != "sessionReady"]
    kinds = [(e.kind_name, getattr(e.payload, "name", None)) for e in events]
    # the plan as a final (untagged), then the call: no partial, no speech
    assert kinds == [("toolCall", "convo.setState"), ("assistantSpeechFinal", None), ("toolCall", "project.search")]
    plan = events[1].payload.text
    assert plan == NOVA_THINKING.strip().removeprefix("<thinking>").removesuffix("</thinking>").strip()
    nova.answer(conn, nova.call_id(conn, "project.search"), '{"succeeded":true}')
    assert app_saw(nova, conn)[1:] == ([plan, "It built."], ["It built."])  # the plan shown, never spoken
