"""A thinking model's reasoning blocks: never spoken, kept in the history, sent back unmodified.

Claude models with (adaptive) thinking stream ``reasoningContent`` deltas; after tool results the
model needs its reasoning back, text and signature unmodified, or Bedrock refuses the request.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from conductor_local.bedrock_server import Step, block_stop, message, message_start, message_stop, metadata, tool_call
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
