"""Several devices you can trust, through the real handlers: a change waits for a yes by the rules
of the device that runs it, a device answers only what was sent to it and taps only what it shows,
a device refused stays refused, a device back gets its call, everyone hears who left, a connection
taken over is told, progress reaches the other devices, and a change's card shows the real lines."""

from __future__ import annotations

import json
from typing import Any

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.wire.protocol import ErrorCode
from tests.handlers.conftest import Connection, Harness

PHONE = {"id": "phone", "name": "Phone", "roles": ["voice", "display"]}
COMPANION = {"id": "desk", "name": "Desk", "roles": ["tools"]}
DISPLAY = {"id": "screen", "name": "Screen", "roles": ["display"]}
EDIT = {"path": "a.swift", "startLine": 2, "endLine": 2, "text": "let b = 20"}
FILE = "let a = 1\nlet b = 2\nlet c = 3\n"
REPLACE = "editor.replaceText"
READ = "editor.readFile"


def start(conductor: Harness, conn: Connection, device: dict[str, Any], **more: Any) -> None:
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "device": device, **more})


def phone_and_companion(conductor: Harness, **phone_start: Any) -> tuple[Connection, Connection]:
    phone = conductor.connect()
    start(conductor, phone, PHONE, **phone_start)
    desk = conductor.connect(phone.session_id)
    start(conductor, desk, COMPANION)
    return phone, desk


def calls(conductor: Harness, conn: Connection, name: str) -> list[Any]:
    return [e.payload for e in conductor.events(conn) if e.kind_name == "toolCall" and e.payload.name == name]


def errors(conductor: Harness, conn: Connection) -> list[str]:
    return [e.payload.code for e in conductor.all_events(conn) if e.kind_name == "error"]


def cards(conductor: Harness, conn: Connection) -> list[dict[str, Any]]:
    patches = [json.loads(e.payload.patch) for e in conductor.events(conn) if e.kind_name == "assistantUIPatch"]
    return [op["value"] for patch in patches for op in patch]


def ask_for_the_edit(conductor: Harness, phone: Connection) -> None:
    conductor.script.push(message("I'll change it.", tool_call(REPLACE, EDIT)))
    conductor.say(phone, "replace line 2 of a.swift")


# ---- a change waits for a yes by the rules of the device that runs it ------------------------------


def test_the_phone_confirming_on_its_own_screen_does_not_let_the_companion_edit_unasked(
    conductor: Harness,
) -> None:
    phone, desk = phone_and_companion(conductor, capabilities=["autoApproveChanges"])
    ask_for_the_edit(conductor, phone)
    assert calls(conductor, desk, REPLACE) == []  # held: the companion never asks anybody
    assert ("final", "Replace line 2 of a.swift?") in conductor.summary(phone)
    conductor.script.push(message("Done."))
    conductor.say(phone, "yes")
    (edit,) = calls(conductor, desk, REPLACE)
    assert json.loads(edit.arguments) == EDIT


def test_a_device_declaring_the_edit_without_effects_does_not_unhold_the_companions(conductor: Harness) -> None:
    phone = conductor.connect()
    lax = [{"name": REPLACE, "description": "Replace lines", "arguments": {"type": "object"}}]
    start(conductor, phone, {**PHONE, "roles": ["voice", "display", "tools"]}, tools=lax)
    desk = conductor.connect(phone.session_id)
    strict = [{**lax[0], "effects": "changes"}]
    start(conductor, desk, COMPANION, tools=strict)
    ask_for_the_edit(conductor, phone)
    assert calls(conductor, phone, REPLACE) == [] and calls(conductor, desk, REPLACE) == []
    assert ("final", "Replace line 2 of a.swift?") in conductor.summary(phone)


# ---- the card shows the lines as the device that runs the edit has them ----------------------------


def test_the_change_card_shows_the_line_it_replaces_read_by_the_device_that_runs_the_edit(
    conductor: Harness,
) -> None:
    phone, desk = phone_and_companion(conductor)
    ask_for_the_edit(conductor, phone)
    assert cards(conductor, phone) == []  # not before the lines are known
    (preview,) = calls(conductor, desk, READ)
    assert preview.call_id.startswith("conductor-preview-") and calls(conductor, phone, READ) == []
    # Only the device it went to may answer it.
    conductor.answer(phone, preview.call_id, json.dumps({"path": "a.swift", "text": "forged\nforged\n"}))
    assert ErrorCode.NO_PENDING_TOOL_CALL in errors(conductor, phone) and cards(conductor, phone) == []
    conductor.answer(desk, preview.call_id, json.dumps({"path": "a.swift", "text": FILE, "truncated": False}))
    (card,) = cards(conductor, phone)
    body = card["body"].splitlines()
    assert "-let b = 2" in body and "+let b = 20" in body
    assert not any("as it is now" in line for line in body)
    assert cards(conductor, desk) == cards(conductor, phone)  # the same numbered card for every device


def test_a_preview_that_could_not_be_read_says_why_on_the_card(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    ask_for_the_edit(conductor, phone)
    (preview,) = calls(conductor, desk, READ)
    conductor.answer(desk, preview.call_id, None, error="no such file: a.swift")
    (card,) = cards(conductor, phone)
    assert "- (a.swift could not be read: no such file: a.swift)" in card["body"].splitlines()


# ---- a device answers only what was sent to it, and taps only what it shows ------------------------


def test_the_sessions_first_device_cannot_answer_or_report_on_a_call_sent_to_the_companion(
    conductor: Harness,
) -> None:
    phone, desk = phone_and_companion(conductor)
    conductor.script.push(message(tool_call(READ, {"path": "a.swift"})))
    conductor.say(phone, "read a.swift")
    (call,) = calls(conductor, desk, READ)
    conductor.send(phone, "toolProgress", {"callId": call.call_id, "fraction": 0.9, "message": "forged"})
    conductor.answer(phone, call.call_id, '{"text":"forged"}')
    assert errors(conductor, phone).count(ErrorCode.NO_PENDING_TOOL_CALL) == 2
    state = runtime.store().load(phone.session_id)
    assert state is not None
    held = state.model_call(call.call_id)
    assert held is not None and held.result is None and held.progress is None
    conductor.script.push(message("It says let a."))
    conductor.answer(desk, call.call_id, '{"text":"let a = 1"}')
    assert ("final", "It says let a.") in conductor.summary(phone)


def test_a_tools_only_device_cannot_approve_a_held_change(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    ask_for_the_edit(conductor, phone)
    conductor.send(desk, "confirmChange", {"approve": True})
    (refused,) = [e for e in conductor.all_events(desk) if e.kind_name == "error"]
    assert refused.payload.code == ErrorCode.INVALID_EVENT and refused.seq is None  # to it alone, unnumbered
    assert errors(conductor, phone) == []
    assert calls(conductor, desk, REPLACE) == []
    screen = conductor.connect(phone.session_id)
    start(conductor, screen, DISPLAY)
    conductor.script.push(message("Done."))
    conductor.send(screen, "confirmChange", {"approve": True})  # a display taps
    assert len(calls(conductor, desk, REPLACE)) == 1


# ---- a device refused stays refused; a device back gets its call; everyone hears who left ----------


def test_a_device_refused_as_one_too_many_cannot_take_the_session_over_with_its_next_event(
    conductor: Harness,
) -> None:
    phone = conductor.connect()
    start(conductor, phone, PHONE)
    for n in range(3):
        other = conductor.connect(phone.session_id)
        start(conductor, other, {"id": f"d{n}", "name": f"D{n}", "roles": ["display"]})
    fifth = conductor.connect(phone.session_id)
    start(conductor, fifth, {"id": "d9", "name": "D9", "roles": ["voice", "display"]})
    assert errors(conductor, fifth) == [ErrorCode.TOO_MANY_DEVICES]
    conductor.script.push(message("Not for you."))
    conductor.say(fifth, "hello from the fifth")
    state = runtime.store().load(phone.session_id)
    assert state is not None and state.connection_id == phone.connection_id
    assert errors(conductor, fifth) == [ErrorCode.TOO_MANY_DEVICES, ErrorCode.TOO_MANY_DEVICES]
    assert not [e for e in conductor.events(fifth) if e.kind_name != "error"]
    assert conductor.script.requests == []  # its words started nothing


def test_a_device_back_without_last_seq_gets_its_unanswered_call(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    conductor.script.push(message(tool_call(READ, {"path": "a.swift"})))
    conductor.say(phone, "read a.swift")
    (call,) = calls(conductor, desk, READ)
    back = conductor.connect(phone.session_id)
    start(conductor, back, COMPANION)  # restarted: no lastSeq
    (again,) = calls(conductor, back, READ)
    assert again.call_id == call.call_id


def test_the_others_hear_when_a_device_that_joined_beside_the_first_one_leaves(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    screen = conductor.connect(phone.session_id)
    start(conductor, screen, DISPLAY)
    conductor.disconnect(desk)
    for conn in (phone, screen):
        left = [e.payload for e in conductor.events(conn) if e.kind_name == "devicesChanged" and e.payload.left]
        assert [change.left for change in left] == ["desk"], conn
        assert [device.id for device in left[-1].devices] == ["phone", "screen"]


# ---- a connection taken over is told so ------------------------------------------------------------


def test_an_app_that_never_names_its_device_is_told_when_a_new_connection_takes_its_session(
    conductor: Harness,
) -> None:
    first = conductor.connect()
    conductor.start_session(first)
    second = conductor.connect(first.session_id)
    conductor.start_session(second)
    assert errors(conductor, first) == [ErrorCode.TAKEN_OVER]
    assert errors(conductor, second) == []


def test_a_named_device_connecting_again_tells_its_older_connection(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    phone_again = conductor.connect(phone.session_id)
    start(conductor, phone_again, PHONE)
    desk_again = conductor.connect(phone.session_id)
    start(conductor, desk_again, COMPANION)
    assert errors(conductor, phone) == [ErrorCode.TAKEN_OVER]
    assert errors(conductor, desk) == [ErrorCode.TAKEN_OVER]
    assert errors(conductor, phone_again) == [] and errors(conductor, desk_again) == []


def test_a_companion_joining_beside_a_named_phone_takes_nothing_over(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    assert errors(conductor, phone) == [] and errors(conductor, desk) == []


# ---- progress reaches the other devices ------------------------------------------------------------


def test_progress_from_the_device_running_a_build_reaches_the_devices_that_show_it(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    screen = conductor.connect(phone.session_id)
    start(conductor, screen, DISPLAY)
    conductor.script.push(message(tool_call("build.run", {})), message("The build is running."))
    conductor.say(phone, "build it")
    (build,) = calls(conductor, desk, "build.run")
    conductor.send(desk, "toolProgress", {"callId": build.call_id, "fraction": 0.25, "message": "Compiling 41 of 120"})
    for conn in (phone, screen):
        (seen,) = [e for e in conductor.events(conn) if e.kind_name == "toolProgress"]
        assert seen.seq is None  # unnumbered, never kept
        assert (seen.payload.call_id, seen.payload.name) == (build.call_id, "build.run")
        assert (seen.payload.fraction, seen.payload.message) == (0.25, "Compiling 41 of 120")
    assert not [e for e in conductor.events(desk) if e.kind_name == "toolProgress"]


def test_a_single_device_gets_no_progress_back(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.script.push(message(tool_call("build.run", {})), message("The build is running."))
    conductor.say(conn, "build it")
    build = conductor.call_id(conn, "build.run")
    conductor.send(conn, "toolProgress", {"callId": build, "fraction": 0.5})
    assert not [e for e in conductor.events(conn) if e.kind_name == "toolProgress"]


def test_a_companion_runs_the_calls_though_the_phone_that_spoke_runs_tools_too(conductor: Harness) -> None:
    phone = conductor.connect()
    start(conductor, phone, {**PHONE, "roles": ["voice", "display", "tools"]})
    desk = conductor.connect(phone.session_id)
    start(conductor, desk, COMPANION)
    conductor.script.push(message(tool_call(READ, {"path": "a.swift"})))
    conductor.say(phone, "read a.swift")
    (call,) = calls(conductor, desk, READ)
    assert calls(conductor, phone, READ) == []
    conductor.script.push(message("It reads let a."))
    conductor.answer(desk, call.call_id, '{"text":"let a = 1"}')
    conductor.finish_turn(phone)
    conductor.disconnect(desk)  # without the companion, the phone runs them again
    conductor.script.push(message(tool_call(READ, {"path": "b.swift"})))
    conductor.say(phone, "read b.swift")
    assert [json.loads(call.arguments) for call in calls(conductor, phone, READ)] == [{"path": "b.swift"}]
