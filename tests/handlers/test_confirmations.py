"""Changes said yes to: an edit asked for by voice waits for the person's yes."""

from __future__ import annotations

import json
from typing import Any

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.core import conductor as core
from tests.handlers.conftest import Connection, Harness

READ = "editor.readFile"
EDIT = {"path": "Sources/App/main.swift", "startLine": 10, "endLine": 20, "text": "let x = 1\nlet y = 2\n"}


def asked_for_an_edit(conductor: Harness, capabilities: list[str] | None = None) -> Connection:
    conn = conductor.connect()
    start: dict[str, Any] = {"sessionId": conn.session_id}
    if capabilities is not None:
        start["capabilities"] = capabilities
    conductor.send(conn, "sessionStart", start)
    conductor.script.push(message("I'll change it.", tool_call("editor.replaceText", EDIT)))
    conductor.say(conn, "replace lines ten to twenty of main")
    return conn


def edits_sent(conductor: Harness, conn: Connection) -> list[Any]:
    return [
        e.payload
        for e in conductor.events(conn)
        if e.kind_name == "toolCall" and e.payload.name == "editor.replaceText"
    ]


def last_tool_results(conductor: Harness) -> list[dict[str, Any]]:
    sent = conductor.script.requests[-1].body["messages"]
    return [block["toolResult"] for m in sent if m["role"] == "user" for block in m["content"] if "toolResult" in block]


def test_the_edit_waits_for_a_yes_with_a_spoken_question_and_a_diff_card(conductor: Harness) -> None:
    conn = asked_for_an_edit(conductor)
    assert edits_sent(conductor, conn) == []
    summary = conductor.summary(conn)
    assert ("final", "Replace lines 10 to 20 of main.swift?") in summary
    assert ("toolCall", "tts.speak", {"text": "Replace lines 10 to 20 of main.swift?"}) in summary
    assert summary[-1] == ("toolCall", "convo.setState", {"state": "idle"})  # the app listens
    # The card waits for the file as the app has it: the conductor asks the app to read it first.
    assert not [e for e in conductor.events(conn) if e.kind_name == "assistantUIPatch"]
    (preview,) = [e.payload for e in conductor.events(conn) if e.kind_name == "toolCall" and e.payload.name == READ]
    assert preview.call_id.startswith("conductor-preview-") and json.loads(preview.arguments) == {"path": EDIT["path"]}
    text = "".join(f"line {n} as it is\n" for n in range(1, 26))
    conductor.answer(conn, preview.call_id, json.dumps({"path": EDIT["path"], "text": text, "truncated": False}))
    (patch,) = [json.loads(e.payload.patch) for e in conductor.events(conn) if e.kind_name == "assistantUIPatch"]
    card = patch[0]["value"]
    assert card["type"] == "diff" and "+let x = 1" in card["body"] and "@@ -10,11" in card["body"]
    shown = card["body"].splitlines()
    assert [line for line in shown if line.startswith("-") and not line.startswith("---")] == [
        f"-line {n} as it is" for n in range(10, 21)
    ]
    assert edits_sent(conductor, conn) == []  # still waiting for the yes
    conductor.script.push(message("Done: lines 10 to 20 are replaced."))
    conductor.say(conn, "yes, go ahead")
    (edit,) = edits_sent(conductor, conn)
    assert json.loads(edit.arguments) == EDIT
    conductor.answer(conn, edit.call_id, '{"replaced":true}')
    assert last_tool_results(conductor)[-1]["status"] == "success"
    assert ("final", "Done: lines 10 to 20 are replaced.") in conductor.summary(conn)


def test_a_no_never_sends_the_edit_and_the_model_hears_it_was_declined(conductor: Harness) -> None:
    conn = asked_for_an_edit(conductor)
    conductor.script.push(message("Okay, I left the file as it is."))
    conductor.say(conn, "no")
    assert edits_sent(conductor, conn) == []
    (declined,) = last_tool_results(conductor)
    assert declined["status"] == "error" and "declined by the user" in declined["content"][0]["text"]
    assert ("final", "Okay, I left the file as it is.") in conductor.summary(conn)


def test_anything_else_declines_the_edit_and_is_taken_as_the_new_request(conductor: Harness) -> None:
    conn = asked_for_an_edit(conductor)
    conductor.script.push(message("Opening the readme."))
    conductor.say(conn, "actually open the readme instead")
    assert edits_sent(conductor, conn) == []
    messages = conductor.script.requests[-1].body["messages"]
    last = messages[-1]
    assert last["role"] == "user" and last["content"][-1] == {"text": "actually open the readme instead"}
    results = [b["toolResult"] for b in last["content"] if "toolResult" in b]
    assert results and "declined by the user" in results[0]["content"][0]["text"]


def test_an_app_that_approves_changes_itself_gets_the_edit_at_once(conductor: Harness) -> None:
    conn = asked_for_an_edit(conductor, capabilities=["autoApproveChanges"])
    assert len(edits_sent(conductor, conn)) == 1
    assert not [e for e in conductor.events(conn) if e.kind_name == "assistantUIPatch"]


def test_a_reconnect_while_asking_does_not_send_the_edit_and_the_question_times_out(conductor: Harness) -> None:
    conn = asked_for_an_edit(conductor)
    again = conductor.connect(conn.session_id)
    conductor.start_session(again)
    assert edits_sent(conductor, again) == []
    state = runtime.store().load(conn.session_id)
    assert state is not None and state.turn is not None and state.turn.tools is not None
    (held,) = state.turn.tools.pending()
    assert held.held and held.deadline > 0
    timed_out = core.handle_tool_deadlines(state, now=held.deadline + 1)
    (op,) = [op for op in timed_out.history if op.role == "user"]
    assert "not confirmed" in op.content[0]["toolResult"]["content"][0]["text"]
